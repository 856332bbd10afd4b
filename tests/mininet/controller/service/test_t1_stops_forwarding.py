"""A T1 that stops forwarding (every frame to and from it dropped, carrier up: the fault library's blackhole on both
ends of both its links, as bench/collectives.py's paper scenario) under `fabricctl run`, on a lab of this module's
own in endpoint mode (`run` reconciles every switch to its topology file and its own record, which no other
module's lab may be left with):
- the controller's probes record both its links failed within DETECT_BOUND_MS of the fault, each with the port
  counters as second witness, and restore them once it forwards again (the tables back at the healthy plan);
- with `--endpoints LAB --loops DIR`, one host's loop agent's report reaches a sender on the other leaf as its EV
  through the T1 DENIED, with no `fabricctl endpoint denylist`, and the EV is taken back once the T1 forwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.model.failures import LinkDown
from controller.state import statefile
from mininet_labs import faults
from tests.loopcheck import LEAVES, SPINE, one_agent_under_run_reaches_a_remote_host
from tests.mininet.conftest import free_port_base, lab_missing
from tests.paths import REPO

WITHIN = 60.0  # the longest any wait here may take (two cores shared with other labs): a hung controller
# From the fault to the controller's link_down, by fabricctl run's default timers (period P = 50 ms, timeout floor
# 80 ms, K = 3, the adaptive timeout T at most the hard timeout H = 1 s): SPINE's probes to the leaves are judged a
# timeout T after they left, the K-th K - 1 periods after the first, and the port counters then settle for
# max(2 P, T - floor): on a quiet lab ~0.3 s, at worst 2 H + (K + 1) P = 2.2 s; and 0.8 s for the rounds a
# loaded machine starts late.
DETECT_BOUND_MS = 3000.0


@pytest.fixture(scope="module")
def lab(lab_dir: Path) -> Iterator[Any]:
    """The default lab in endpoint mode (the topology's host_source_routing: true), started as `lab up` does."""
    why = lab_missing()
    if why:
        pytest.skip(why)
    from controller.model.topology import from_dict, to_dict
    from mininet_labs.headless import start_headless
    from mininet_labs.lab import cleanup
    from mininet_labs.labstate import default_topology

    model = from_dict({**to_dict(default_topology(grpc_base_port=free_port_base(8))), "host_source_routing": True})
    try:
        yield start_headless(model, lab_dir, tag=f"b{os.getpid() % 100}", election_id=1, timeout=10.0)
    finally:
        cleanup(lab_dir)


def t1_stops(lab: Any, both_ways: bool = True) -> tuple[Callable[[], None], Callable[[], None]]:
    """SPINE stopping forwarding (its egress to every leaf blackholed, and with `both_ways` every leaf's egress to
    it), carrier up; and the undo."""
    ends = [(SPINE, leaf) for leaf in LEAVES] + ([(leaf, SPINE) for leaf in LEAVES] if both_ways else [])

    def stop() -> None:
        for a, b in ends:
            faults.inject(lab, "blackhole", [a, b])

    def restart() -> None:
        for a, b in reversed(ends):
            faults.undo(lab, "blackhole", [a, b])

    return stop, restart


def events(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def until(what: str, ok: Callable[[], Any], said: Callable[[], Any] = lambda: "") -> Any:
    """`ok`'s first true answer, within WITHIN (a deadline for a hung controller, not a timing claim)."""
    end = time.monotonic() + WITHIN
    while not (got := ok()):
        assert time.monotonic() < end, f"not within {WITHIN:.0f} s: {what} {said()}"
        time.sleep(0.05)
    return got


def first_downs(evs: list[dict[str, Any]]) -> dict[tuple[str, ...], dict[str, Any]]:
    """Each link's first link_down event."""
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for e in evs:
        if e["kind"] == "link_down":
            out.setdefault(tuple(e["link"]), e)
    return out


def tables_equal_plan(lab: Any) -> dict[str, str]:
    """Per switch that differs from the plan of the lab's recorded failures: how (read back from the switches)."""
    outcomes = lab.install(dry_run=True, push="never")
    return {n: (o.error or o.delta.summary()) for n, o in outcomes.items() if not o.ok or o.delta}


def test_a_t1_that_stops_forwarding_is_recorded_failed_within_the_bound_and_restored(lab: Any, tmp_path: Path) -> None:
    ev = tmp_path / "events.jsonl"
    log = open(tmp_path / "run.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), "--election-id",
                             "10", "run", "--restore-after", "20", "--counters-every", "0", "--events", str(ev)],
                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    said = lambda: [(e["kind"], e.get("link"), e.get("ports")) for e in events(ev)  # noqa: E731
                    if e["kind"] in ("link_down", "link_up", "failures_recorded", "probe_stall")]
    links = {LinkDown(leaf, SPINE) for leaf in LEAVES}
    stop, restart = t1_stops(lab)
    try:
        until("every probe direction armed", lambda: any(e["kind"] == "probes_armed" for e in events(ev)))
        assert statefile.load_state(lab.failure_state_path) == frozenset() and tables_equal_plan(lab) == {}
        stopped_ns = time.monotonic_ns()
        stop()
        try:
            downs = until(f"both links of {SPINE} down", lambda: len(d := first_downs(events(ev))) == 2 and d, said)
            until(f"both links of {SPINE} recorded", lambda: statefile.load_state(lab.failure_state_path) == links,
                  lambda: statefile.load_state(lab.failure_state_path))
            until("the failover deltas written", lambda: any(e["kind"] == "deltas_written" and e["failures"] == 2
                                                            for e in events(ev)), said)
            assert tables_equal_plan(lab) == {}  # every switch holds the plan of the two failed links
        finally:
            restart()
        until(f"both links of {SPINE} restored", lambda: statefile.load_state(lab.failure_state_path) == frozenset(),
              said)
        until("the restoring deltas written", lambda: (d := [e for e in events(ev) if e["kind"] == "deltas_written"])
              and d[-1]["failures"] == 0, said)
        assert tables_equal_plan(lab) == {}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()
    assert set(downs) == {(leaf, SPINE) for leaf in LEAVES}
    for d in downs.values():  # each confirmed by its port counters: frames left one end, none reached the other
        assert "consecutive probes lost" in d["evidence"] and d["ports"].startswith("dead: "), d
        assert " 0 arrived at " in d["ports"], d
    detected_ms = {f"{a}--{b}": round((d["t_mono_ns"] - stopped_ns) / 1e6) for (a, b), d in downs.items()}
    print(json.dumps({"detected_ms": detected_ms, "directions": [d["direction"] for d in downs.values()],
                      "load1": os.getloadavg()[0]}))
    assert max(detected_ms.values()) <= DETECT_BOUND_MS, detected_ms


def test_under_fabricctl_run_a_hosts_report_reaches_a_sender_on_the_other_leaf_as_denied(
        lab: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel tier's check (tests/kernel/endpoint/test_loops.py) on bmv2: SPINE's egress to every leaf
    blackholed, `fabricctl run --endpoints --loops` primary above the lab's own election id."""
    monkeypatch.setenv("FABRIC_ELECTION_ID", "10")
    print(one_agent_under_run_reaches_a_remote_host(lab, *t1_stops(lab, both_ways=False)))
