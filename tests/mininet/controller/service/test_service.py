"""`fabricctl run` on the default lab: it detects link cuts, gray loss and flapping by its own probes,
records them under the state lock and pulls/restores the segments; it brings a restarted switch
back to the plan; two of them share mastership; a SIGKILLed one restarts into exactly the plan."""

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

from controller.state import statefile
from controller.model.failures import LinkDown
from tests.paths import REPO

ROOT = REPO
LEAF, SPINE = "p0-t0-0", "p0-t1-1"
TIMEOUT = 60.0  # generous bound for every wait: the lab shares two cores with other labs


class Controller:
    """A `fabricctl run` process on the lab, with its events file."""

    def __init__(self, lab: Any, election_id: int, events: Path, *extra: str) -> None:
        self.lab, self.events = lab, events
        # the default probe period and timeout (20 / 80 ms): late probes on CI's two busy cores are held
        # back by the adaptive timeout and the port counters, not judged lost
        argv = [sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), "--election-id",
                str(election_id), "run", "--restore-after", "20",
                "--counters-every", "0", "--events", str(events), *extra]
        self.log = open(events.with_suffix(".log"), "w")
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})

    def all_events(self) -> list[dict[str, Any]]:
        if not self.events.exists():
            return []
        out = []
        for line in self.events.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def wait(self, pred: Callable[[dict[str, Any]], bool], what: str, after: int = 0) -> dict[str, Any]:
        """The first event (from index `after`) satisfying pred, waiting up to TIMEOUT."""
        end = time.monotonic() + TIMEOUT
        while time.monotonic() < end:
            for e in self.all_events()[after:]:
                if pred(e):
                    return e
            assert self.proc.poll() is None, f"fabricctl run exited {self.proc.returncode}: {self._log()}"
            time.sleep(0.05)
        raise AssertionError(f"no event {what} within {TIMEOUT:.0f}s; log: {self._log()}")

    def primary_everywhere(self, after: int = 0) -> None:
        """Wait until every switch reported this controller primary (after index `after`)."""
        names = {s.name for s in self.lab.model.switches}
        end = time.monotonic() + TIMEOUT
        while time.monotonic() < end:
            roles: dict[str, str] = {}
            for e in self.all_events()[after:]:
                if e["kind"] == "mastership":
                    roles[e["switch"]] = e["role"]
            if names == {n for n, r in roles.items() if r == "primary"}:
                return
            assert self.proc.poll() is None, f"fabricctl run exited {self.proc.returncode}: {self._log()}"
            time.sleep(0.05)
        raise AssertionError(f"not primary everywhere within {TIMEOUT:.0f}s: {self._log()}")

    def _log(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()[-1500:]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def controller(lab: Any, tmp_path: Path) -> Iterator[Callable[..., Controller]]:
    """Start `fabricctl run` processes; each is stopped, and the failure record cleared, at the end."""
    made: list[Controller] = []

    def start(election_id: int = 10, name: str = "events", *extra: str) -> Controller:
        c = Controller(lab, election_id, tmp_path / f"{name}.jsonl", *extra)
        made.append(c)
        return c

    yield start
    for c in made:
        c.stop()
    statefile.save_state(lab.failure_state_path, [])
    lab.install(push="missing")


def recorded(lab: Any) -> frozenset:
    return statefile.load_state(lab.failure_state_path)


def tables_equal_plan(lab: Any) -> dict[str, str]:
    """Per switch that differs from the plan of the recorded failures: how (read back from the switches)."""
    outcomes = lab.install(dry_run=True, push="never")
    return {n: (o.error or o.delta.summary()) for n, o in outcomes.items() if not o.ok or o.delta}


def link_event(kind: str, leaf: str = LEAF, spine: str = SPINE) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["kind"] == kind and e.get("link") == [leaf, spine]


def recorded_event(added: bool, leaf: str = LEAF, spine: str = SPINE) -> Callable[[dict[str, Any]], bool]:
    want = f"link {leaf} -- {spine}"
    return lambda e: e["kind"] == "failures_recorded" and want in e["added" if added else "removed"]


def test_cut_link_is_detected_pulled_and_restored_with_no_operator(lab, controller):
    c = controller()
    c.primary_everywhere()
    assert tables_equal_plan(lab) == {}
    lab.cut_link(LEAF, SPINE)
    try:
        down = c.wait(link_event("link_down"), "link_down")
        assert "consecutive probes lost" in down["evidence"]
        # the second witness: packets left the cut port and none reached the far end
        assert down["ports"].startswith("dead: ") and " 0 arrived at " in down["ports"], down
        c.wait(recorded_event(True), "failure recorded")
        c.wait(lambda e: e["kind"] == "deltas_written" and e["failures"] == 1, "deltas written")
        assert recorded(lab) == {LinkDown(LEAF, SPINE)}
        assert tables_equal_plan(lab) == {}  # segments through the cut pulled on every switch
        report = lab.traffic([("h0", "h2"), ("h2", "h0")], qps=4, messages=4, planes=[0], timeout=60)
        assert report.problems() == []  # plane 0 traffic flows on the other spine
    finally:
        lab.mend_link(LEAF, SPINE)
    n = len(c.all_events())
    c.wait(link_event("link_up"), "link_up", after=n)
    c.wait(recorded_event(False), "failure removed", after=n)
    c.wait(lambda e: e["kind"] == "deltas_written" and e["failures"] == 0, "restore deltas", after=n)
    assert recorded(lab) == frozenset()
    assert tables_equal_plan(lab) == {}


def test_healthy_links_under_traffic_are_not_failed(lab, controller):
    """With RoCEv2 senders and receivers busy on the same two cores, healthy links' probes come back late,
    and a controller that judged them lost would pull healthy links. Every host sends to
    every other at the lab's full rate for several seconds: no link may go down and nothing may be
    recorded; losses the probes saw are held back by the port counters (or never judged)."""
    c = controller()
    c.primary_everywhere()
    n = len(c.all_events())
    report = lab.traffic(qps=4, messages=64, rate=2000, plane_mode="packet", timeout=120)
    events = c.all_events()[n:]
    downs = [e for e in events if e["kind"] in ("link_down", "failures_recorded")]
    assert downs == [], downs
    assert recorded(lab) == frozenset()
    assert tables_equal_plan(lab) == {}
    assert report.totals()["sent"] > 0


def test_host_nic_down_is_seen_by_its_neighbor_discovery_probes_and_restored(lab, controller):
    """A host NIC whose port goes down (the lab's cross-plane failure) is seen without the lab
    telling the controller: its T0's Neighbor Solicitations go unanswered and the port counters agree;
    the host port is recorded failed and its segments pulled, then restored once the NIC answers."""
    from controller.model.failures import HostPortDown

    c = controller()
    c.primary_everywhere()
    nic = lab.host("h0").nic(0)
    port = lab.model.switch(nic.leaf).host_ports[nic.slot]

    def port_event(kind: str) -> Callable[[dict[str, Any]], bool]:
        return lambda e: e["kind"] == kind and e.get("port") == [nic.leaf, port]

    n = len(c.all_events())
    lab.host_nic("h0", 0, "down")
    try:
        down = c.wait(port_event("port_down"), "port_down", after=n)
        assert down["host"] == "h0" and "consecutive probes lost" in down["evidence"]
        assert down["ports"].startswith("dead: ") and " 0 arrived at " in down["ports"], down
        wait_until(settled(lab, frozenset({HostPortDown(nic.leaf, port)})), "the NIC's port recorded and pulled")
        others = [e for e in c.all_events()[n:] if e["kind"] in ("link_down", "port_down") and e != down]
        assert others == []  # only that NIC
    finally:
        lab.host_nic("h0", 0, "up")
    n = len(c.all_events())
    up = c.wait(port_event("port_up"), "port_up", after=n)
    assert up["evidence"].endswith("consecutive probes arrived")
    wait_until(settled(lab, frozenset()), "the port restored")


def nft(*args: str) -> None:
    subprocess.run(["nft", *args], check=True, capture_output=True, text=True)


def test_gray_loss_of_20_percent_is_pulled(lab, controller):
    from mininet_labs.topo import link_ends

    leaf_end, _ = link_ends(lab.model, LEAF, SPINE, lab.tag)
    table = f"srv6svc{os.getpid()}"
    c = controller(10, "events", "--fail-after", "10")  # 20% loss: 10 in a row ~1e-7, so only the window fires
    c.primary_everywhere()
    n = len(c.all_events())
    nft("add", "table", "netdev", table)
    try:
        nft("add", "chain", "netdev", table, "egress",
            f'{{ type filter hook egress device "{leaf_end.intf}" priority 0; }}')
        nft("add", "rule", "netdev", table, "egress", "numgen", "random", "mod", "100", "<", "20", "drop")
        down = c.wait(link_event("link_down"), "link_down under 20% loss")
        assert down["direction"].startswith(f"{LEAF}:")  # only the direction through the lossy egress
        assert down["evidence"].endswith("of the last 100 probes lost")
        c.wait(recorded_event(True), "gray failure recorded")
        # the record comes first, then the deltas (and a full reconcile of a switch whose delta failed)
        c.wait(lambda e: e["kind"] == "deltas_written" and e["failures"] == 1, "deltas written", after=n)
        wait_until(settled(lab, frozenset({LinkDown(LEAF, SPINE)})), "the gray failure's plan on every switch")
    finally:
        subprocess.run(["nft", "delete", "table", "netdev", table], capture_output=True)
    c.wait(recorded_event(False), "gray failure removed once the loss stops")


def test_flapping_link_churns_the_tables_a_bounded_number_of_times(lab, controller):
    c = controller()
    c.primary_everywhere()
    cuts = 8
    for _ in range(cuts):  # 0.4 s cut, 0.4 s mended: up phases of ~8 probes, M = 20 doubling per flap
        n = len(c.all_events())
        lab.cut_link(LEAF, SPINE)
        c.wait(link_event("link_down"), "link_down", after=n) if _ == 0 else time.sleep(0.4)
        lab.mend_link(LEAF, SPINE)
        time.sleep(0.4)
    recorded_downs = sum(1 for e in c.all_events() if recorded_event(True)(e))
    assert 1 <= recorded_downs <= cuts // 2  # damping: the link stays down rather than follow each flap
    c.wait(recorded_event(False), "restored once the flapping stops", after=0)
    end = time.monotonic() + TIMEOUT
    while recorded(lab) and time.monotonic() < end:
        time.sleep(0.1)
    assert recorded(lab) == frozenset()
    assert tables_equal_plan(lab) == {}


def wait_until(cond: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + TIMEOUT
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"not {what} within {TIMEOUT:.0f}s")


def settled(lab: Any, failures: frozenset) -> Callable[[], bool]:
    """The recorded failures are `failures` and every switch holds their plan (read back)."""
    return lambda: recorded(lab) == failures and tables_equal_plan(lab) == {}


def test_restarted_switch_gets_its_pipeline_and_plan_back(lab, controller):
    c = controller()
    c.primary_everywhere()
    n = len(c.all_events())
    killed = lab.kill_switch(SPINE)
    assert killed and lab.status()["switches"][SPINE]["pid"] is None  # lab status: no dead PID
    c.wait(lambda e: e["kind"] == "stream_broken" and e["switch"] == SPINE, "stream_broken", after=n)
    pid = lab.restart_switch(SPINE)
    assert lab.status()["switches"][SPINE]["pid"] == pid
    assert lab.status()["switches"][SPINE]["alive"]
    back = c.wait(lambda e: e["kind"] == "mastership" and e["switch"] == SPINE and e["role"] == "primary",
                  "primary again on the restarted switch", after=n)
    assert back["pipeline"] == "pushed"  # it came back with no pipeline
    # its links were lost while it was away (probes from its neighbours); they come back after M probes
    wait_until(settled(lab, frozenset()), "back to the healthy plan on every switch")


def test_backup_takes_over_and_a_deposed_primary_is_refused(lab, controller):
    import grpc

    from controller.runtime import wire
    from controller.plan.entries import TableEntry, Ternary
    from controller.runtime.p4rt import SwitchConnection
    from controller.plan.delta import UpdateType

    sw = lab.model.switch(SPINE)
    # the switch itself refuses a deposed primary: X primary, then Y with a higher id, then X writes
    x = SwitchConnection("x", sw.grpc_addr, sw.device_id, 30, p4info=lab.p4info())
    y = SwitchConnection("y", sw.grpc_addr, sw.device_id, 40, p4info=lab.p4info())
    try:
        assert x.connect() is True
        assert y.connect() is True
        wait_until(lambda: not x.is_primary, "x told it is deposed")
        entry = TableEntry("IngressPipe.cpu.punt", (("ether_type", Ternary(0x88B6, 0xFFFF)),),
                           "IngressPipe.cpu.drop", priority=1)
        request = wire.write_request(sw.device_id, 30, [wire.update_bytes(UpdateType.INSERT.value, entry, lab.p4info())])
        with pytest.raises(grpc.RpcError) as refused:
            x._stub.Write(request, timeout=10)  # around the client's own check: the switch must refuse
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        x.close()
        y.close()
    a = controller(10, "a")
    a.primary_everywhere()
    b = controller(20, "b")
    n = len(a.all_events())
    b.primary_everywhere()
    wait_until(lambda: sum(1 for e in a.all_events()[n:] if e["kind"] == "mastership" and e.get("deposed"))
               == len(lab.model.switches), "a deposed on every switch")
    n = len(a.all_events())
    b.stop(signal.SIGKILL)
    a.primary_everywhere(after=n)  # the hot backup takes over every switch
    wait_until(settled(lab, frozenset()), "the plan, after the takeover")


def test_sigkilled_controller_restarts_into_exactly_the_plan(lab, controller):
    import random

    rng = random.Random(9)
    c = controller(10, "c0")
    c.primary_everywhere()
    lab.cut_link(LEAF, SPINE)
    try:
        c.wait(link_event("link_down"), "link_down")
        time.sleep(rng.uniform(0, 0.2))
        c.stop(signal.SIGKILL)  # somewhere between detection, the record and the deltas
        c = controller(10, "c1")
        c.primary_everywhere()
        wait_until(settled(lab, frozenset({LinkDown(LEAF, SPINE)})), "the failed link's plan after the restart")
    finally:
        lab.mend_link(LEAF, SPINE)
    time.sleep(rng.uniform(0, 0.5))
    c.stop(signal.SIGKILL)  # and again while the link comes back
    c = controller(10, "c2")
    c.primary_everywhere()
    wait_until(settled(lab, frozenset()), "the healthy plan after the second restart")
