"""The same RoCEv2 frames through the bmv2 lab and the kernel lab: each host receives the same bytes (ICRC
included), but for the inner hop limit, which the kernel's destination leaf decrements (docs/kernel.md).
It needs both data planes: in the mininet tier (bmv2, Mininet), skipped naming what is missing, the kernel's
SRv6 included."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mininet_labs import roce
from mininet_labs.switch import free_port_base
from tests.kernel.mininet_labs.kernel.test_lab import _exchange, _frames

HOP_LIMIT = 14 + 7  # Ethernet header, then the IPv6 hop limit byte


def _received(lab: Any, tmp: Path) -> tuple[dict[str, list[dict[str, str]]], dict[str, list[bytes]]]:
    frames = {h: _frames(lab, h, [d for d in lab.hosts if d != h], range(49152, 49155)) for h in lab.hosts}
    got = _exchange(lab, tmp, frames)
    return frames, {h: sorted(bytes.fromhex(g["frame"]) for g in items) for h, items in got.items()}


def test_bmv2_and_kernel_deliver_the_same_bytes(tmp_path: Path) -> None:
    from mininet_labs.backends import nodes_for
    from mininet_labs.kernel.nodes import prerequisites as kernel_missing
    from mininet_labs.lab import Lab
    from mininet_labs.labstate import default_topology, prerequisites

    why = prerequisites() or kernel_missing()
    if why:
        pytest.skip(why)
    model = default_topology(grpc_base_port=free_port_base(8))
    (tmp_path / "b").mkdir()
    (tmp_path / "k").mkdir()
    with Lab(model, tmp_path / "bmv2", tag=f"d{os.getpid() % 10000}") as bmv2:
        sent, via_bmv2 = _received(bmv2, tmp_path / "b")
    with Lab(model, tmp_path / "kernel", nodes_for("kernel", name=f"x{os.getpid()}")) as kernel:
        _, via_kernel = _received(kernel, tmp_path / "k")
    total = sum(len(v) for v in sent.values())
    assert sum(len(v) for v in via_bmv2.values()) == sum(len(v) for v in via_kernel.values()) == total == 72
    for host in via_bmv2:
        def key(f: bytes) -> bytes:
            return f[:HOP_LIMIT] + f[HOP_LIMIT + 1:]

        kernel = {key(f): f[HOP_LIMIT] for f in via_kernel[host]}
        assert len(kernel) == len(via_kernel[host]) == len(via_bmv2[host])
        for f in via_bmv2[host]:
            assert roce.icrc_ok(f)
            # the same /64 is the same leaf: both data planes route such a packet once, decrementing it; across
            # leaves bmv2 keeps the inner hop limit (encap, decap) and the kernel's destination leaf decrements it
            same_leaf = f[22:30] == f[38:46]
            assert kernel.get(key(f)) == f[HOP_LIMIT] - (0 if same_leaf else 1), (host, f[:64].hex())
    # bmv2 hands each host the packet as sent across leaves (hop limit included); under one leaf, one lower
    want = sorted(bytes(f[14:21]) + bytes([f[21] - (f[22:30] == f[38:46])]) + f[22:]
                  for f in (bytes.fromhex(i["frame"]) for items in sent.values() for i in items))
    assert sorted(f[14:] for frames in via_bmv2.values() for f in frames) == want
