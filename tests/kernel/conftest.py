"""The kernel tier: a lab of Linux SRv6 routers in namespaces. Needs root, iproute2 and nftables, and a kernel
with SRv6; skipped with the reason otherwise. Run it under the machine's lab lock:
`flock /tmp/srv6-lab.lock .venv/bin/python -m pytest tests/kernel`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


def _why_not() -> str | None:
    try:
        from mininet_labs.kernel.nodes import prerequisites
    except ImportError as e:  # pyroute2 missing
        return f"the kernel lab cannot load: {e}"
    return prerequisites()


@pytest.fixture(scope="session")
def kernel_ready() -> None:
    why = _why_not()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="module")
def lab(kernel_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The default lab (2 planes x 2 T1 x 2 T0 x 2 hosts), up for the module, down afterwards."""
    from mininet_labs.lab import Lab
    from mininet_labs.backends import nodes_for
    from mininet_labs.labstate import default_topology

    lab_dir: Path = tmp_path_factory.mktemp("kernel-lab")
    running = Lab(default_topology(), lab_dir, nodes_for("kernel", name=f"t{os.getpid()}")).up()
    try:
        yield running
    finally:
        report = running.down()
        assert report.clean, report
