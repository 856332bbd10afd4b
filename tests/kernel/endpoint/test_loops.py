"""Host loop probes on the kernel lab in endpoint mode (hosts write their own carriers), no controller running:
a T1 whose namespace drops every IPv6 packet it gets (links and carriers up) is localized by the loop agent of
every host, the far leaf's included, as its own leaf's links to that T1, and the EVs through it are denied at
every host; once it forwards again, nothing is. With one host's agent only, the merged denylist pushed maps the
EV out at a sender on the other leaf, and `fabricctl status` shows who saw the links; under `fabricctl run
--endpoints --loops` the same reaches that sender with no `fabricctl endpoint denylist` at all."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.model.topology import from_dict, to_dict
from tests.loopcheck import (SPINE, figures, one_agent_pushed_to_a_remote_host, one_agent_under_run_reaches_a_remote_host,
                             t1_mapped_out_by_every_host)

TABLE = "sf_loops_stop"


@pytest.fixture(scope="module")
def endpoint_lab(kernel_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The default lab in endpoint mode (the topology's host_source_routing: true)."""
    from mininet_labs.backends import nodes_for
    from mininet_labs.lab import Lab
    from mininet_labs.labstate import default_topology

    model = from_dict({**to_dict(default_topology()), "host_source_routing": True})
    running = Lab(model, tmp_path_factory.mktemp("kernel-loops"), nodes_for("kernel", name=f"l{os.getpid()}")).up()
    try:
        yield running
    finally:
        assert running.down().clean


def _nft_stop_restart(lab: Any) -> tuple[Callable[[], None], Callable[[], None]]:
    """SPINE's namespace dropping every IPv6 packet at prerouting (carrier and links up), and undoing it."""
    from mininet_labs.kernel.netns import exec_argv

    ns = lab.netns_of(SPINE)

    def nft(*args: str) -> None:
        subprocess.run(exec_argv(ns, ["nft", *args]), check=True, capture_output=True, timeout=30)

    def stop() -> None:
        nft("add", "table", "ip6", TABLE)
        nft("add", "chain", "ip6", TABLE, "pre", "{ type filter hook prerouting priority -300; }")
        nft("add", "rule", "ip6", TABLE, "pre", "drop")

    def restart() -> None:
        nft("delete", "table", "ip6", TABLE)

    return stop, restart


def test_a_t1_that_stops_forwarding_is_mapped_out_by_every_host_with_no_controller(endpoint_lab: Any) -> None:
    print(figures(t1_mapped_out_by_every_host(endpoint_lab, *_nft_stop_restart(endpoint_lab))))


def test_one_hosts_report_pushed_maps_the_t1_out_at_a_sender_on_the_other_leaf(endpoint_lab: Any) -> None:
    print(one_agent_pushed_to_a_remote_host(endpoint_lab, *_nft_stop_restart(endpoint_lab)))


def test_under_fabricctl_run_one_hosts_report_reaches_a_sender_on_the_other_leaf_as_denied(endpoint_lab: Any) -> None:
    print(one_agent_under_run_reaches_a_remote_host(endpoint_lab, *_nft_stop_restart(endpoint_lab)))
