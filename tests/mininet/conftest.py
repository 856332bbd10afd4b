"""Fixtures of the mininet tier: one lab of the default size per module, torn down also on failure."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.programs.toolchain import find_binary


def lab_missing() -> str | None:
    """Why a lab cannot run here, naming what is missing; None when it can."""
    if os.geteuid() != 0:
        return "the mininet tier needs root (network namespaces, veths)"
    from mininet_labs._mininet import missing

    why = missing()
    if why:
        return why
    if find_binary("simple_switch_grpc") is None:
        return "simple_switch_grpc not found on PATH (or $SIMPLE_SWITCH_GRPC / $P4_TOOLCHAIN_BIN)"
    return None


def free_port_base(count: int) -> int:
    """A gRPC base port with `count` free ports (and their thrift ports) that no other lab uses."""
    from mininet_labs.switch import free_port_base as free

    return free(count)


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lab")


@pytest.fixture(scope="module")
def lab(lab_dir: Path) -> Iterator[object]:
    """A headless lab of the default size (2 planes x 2 T1 x 2 T0 x 2 hosts), started the way
    `fabricctl lab up` starts it; whatever happens, cleanup removes it at the end of the module."""
    why = lab_missing()
    if why:
        pytest.skip(why)
    from mininet_labs.headless import start_headless
    from mininet_labs.lab import cleanup
    from mininet_labs.labstate import default_topology

    model = default_topology(grpc_base_port=free_port_base(8))
    tag = f"t{os.getpid() % 100}"  # switch port names of this lab: t<n>p0-t0-0-eth1 ...
    try:
        yield start_headless(model, lab_dir, tag=tag, election_id=1, timeout=10.0)
    finally:
        cleanup(lab_dir)
