"""Endpoint mode on a lab: hosts spray over their own SRv6 EVs through real bmv2 switches, and route
around a cut link by themselves (counts, states and tables asserted, never times).

The senders pace at 200 packets/s (the incast excepted: it needs more than its bottleneck serves):
on a 2-core machine under load, 300-400 made the switches tail-drop packets no fault caused (see
test_scenarios' FAST)."""

from __future__ import annotations

from typing import Any

from controller import planning
from controller.plan.evs import host_evs
from endpoint import lab as ep
from endpoint.ev import EvConfig
from endpoint.scenarios import EndpointSchedule, compare
from mininet_labs.scenarios import read_cells

PAIRS = [("h0", "h2"), ("h2", "h0"), ("h1", "h3"), ("h3", "h1")]
PATH_PACKETS = "IngressPipe.headend.path_packets"
PORT_TX = "FabricEgress.port_tx"


def faulty(lab: Any, src: str, dst: str, t0: str, t1: str) -> set[int]:
    evs = host_evs(planning.fabric(lab.model, "srv6_spray"), src, [dst])[dst]
    return {e.id for e in evs if e.spine_name == t1 and t0 in (e.src_leaf, e.dst_leaf)}


def relapses(transitions: list[list[Any]], forgive: float) -> int:
    """Gray strikes an EV's transitions show: each step to ASSUMED_BAD within `forgive` seconds of probes having
    brought it back (the strikes a probe lost after an answered one adds are not in the transitions; a run
    shorter than `forgive` past its first return forgets none)."""
    back, n = None, 0
    for t, _, to, why in transitions:
        if to == "good" and why.endswith("probes answered"):
            back = t
        elif to == "assumed_bad" and back is not None and t - back < forgive:
            n += 1
    return n


def _brief(m: Any) -> str:
    """A failed assertion's evidence: the mode's events, its QPs' losses and the faulty EVs' transitions."""
    qps = [(q["sender"], hex(q["qp"]), q["evs"], q["lost_first_try"], q["retransmitted"], q["first_loss_s"])
           for q in m.qps]
    evs = [(e["sender"], e["ev"], e["timeouts"], e["sack_losses"], e["probes"], e["sent_while_failed"], e["transitions"])
           for e in m.evs]
    return f"events {m.events}; qps (sender, qp, evs, lost 1st, resent, 1st loss s) {qps}; " \
           f"faulty EVs (sender, ev, timeouts, sack losses, probes, sent while failed, transitions) {evs}"


def test_host_ev_spraying_crosses_every_spine_and_plane_and_delivers_everything_intact(lab):
    ep.enable(lab)
    leaf = lab.model.switch("p0-t0-0")
    cells = [("p0-t0-0", PORT_TX, p) for p in leaf.uplinks] + [("p0-t0-0", PATH_PACKETS, j) for j in range(2)]
    before = read_cells(lab, cells)
    # oblivious spraying: round-robin over every EV whatever its health, so each QP crosses all four paths
    # even when an RTT spike on a busy machine makes the health-aware policy set one aside for a while
    report = ep.start(lab, PAIRS, ep.Workload(policy="spray", messages=192, rate=200, duration=20)).wait()
    after = read_cells(lab, cells)
    t = report.totals()
    # (duplicates are allowed: a retransmission after an RTT spike on a busy machine delivers a PSN twice)
    assert (t["expected"], t["received"], t["lost"], t["icrc_bad"]) == (4 * 192, 4 * 192, 0, 0), t
    for r in report.receivers.values():
        assert r["unknown"] == 0
        for q in r["qps"]:
            # every path carried packets of every QP (counting every copy: on a starved switch the first copy
            # of a PSN may be the resend on another EV, the one sprayed there arriving later as a duplicate)
            assert sorted(map(int, q["carried"])) == [0, 1, 1024, 1025], (r["host"], q)  # both spines of both planes
            assert sum(q["carried"].values()) == q["received"] + q["duplicated"] and q["received"] == 48, q
            assert sum(q["per_ev"].values()) == 48, q
    delta = {k: after[k] - before[k] for k in after}
    tx = [v for k, v in delta.items() if PORT_TX in k]
    assert all(v >= 48 for v in tx)  # both uplinks of the leaf carried host-encapsulated packets
    assert all(v == 0 for k, v in delta.items() if PATH_PACKETS in k)  # the leaf's own spraying was not used
    assert all(s["complete"] and s["policy"] == "spray" for s in report.senders.values())


def test_a_cut_link_is_routed_around_by_the_hosts_alone_and_probed_back_after_repair(lab):
    ep.enable(lab)
    t0, t1 = "p0-t0-0", "p0-t1-1"
    sch = EndpointSchedule(seconds=3.0, fault_at=1.0, repair_at=2.0, rate=200, evs_per_qp=2, min_rto_ms=60, probe_ms=20,
                   recover_probes=4)
    c = compare(lab, "cut", t0, t1, modes=("host",), pairs=[("h0", "h2"), ("h1", "h3")], schedule=sch)
    m = c.modes[0]
    s = m.summary
    assert lab.failures() == frozenset() and s["controller_untouched"]  # no controller or operator action
    assert s["complete"] and s["lost"] == 0 and s["icrc_bad"] == 0, _brief(m)  # every PSN delivered in the end
    on = [q for q in m.qps if q["on_fault"]]
    off = [q for q in m.qps if not q["on_fault"]]
    # QP k takes EVs 2k, 2k+1 (mod 4): QPs 0 and 2 are on plane 0 (one of their EVs crosses the cut), 1 and 3 not
    assert sorted((q["sender"], q["qp"]) for q in on) == [("h0", 0x100), ("h0", 0x102), ("h1", 0x100), ("h1", 0x102)]
    assert all(q["lost_first_try"] == 0 for q in off), _brief(m)  # (resent after an RTT spike, perhaps; never lost)
    assert all(q["acked"] == q["total"] for q in m.qps)
    assert len(m.evs) == 2 and {e["ev"] for e in m.evs} == faulty(lab, "h0", "h2", t0, t1) == {1}
    fault_s, repair_s = m.goodput["fault_s"], m.goodput["repair_s"]
    for e in m.evs:
        # each sender made the EV ASSUMED_BAD during the cut on its own evidence (a lost data packet: an RTO, or
        # the ACK of a later one); it sent no data on it while so, and answered probes brought it back after the repair
        failed = [(t, why) for t, _, b, why in e["transitions"] if b == "assumed_bad" and fault_s <= t < repair_s]
        assert failed and e["detected_ms"] is not None and e["restored_ms"] is not None, _brief(m)
        assert e["sent_while_failed"] == 0 and e["probes"] >= 4, _brief(m)
        # the hold-down its own history sets: recover_probes, doubled per relapse (on a loaded machine a spurious
        # loss before the cut can bring it back on probation, and the cut is then a relapse)
        need = sch.recover_probes << relapses(e["transitions"], EvConfig.forgive)
        assert [why for t, a, b, why in e["transitions"] if t >= repair_s and (a, b) == ("assumed_bad", "good")] \
            == [f"{need} probes answered"], _brief(m)
    # the EV carried data again after the repair
    assert s["evs_restored"] == 2


def test_a_blackholed_direction_is_seen_by_acks_alone_and_avoided(lab):
    """The T1 drops what it sends down to the T0: h0's data to h2 still arrives through it, only the ACKs
    (and h2's data to h0) are lost; h0's sender fails the EV on the missing ACKs all the same."""
    ep.enable(lab)
    sch = EndpointSchedule(seconds=2.5, fault_at=0.8, repair_at=1.8, rate=200, min_rto_ms=60, recover_probes=4)
    c = compare(lab, "blackhole", "p0-t0-0", "p0-t1-1", modes=("host",), pairs=[("h0", "h2")], schedule=sch)
    m = c.modes[0]
    assert m.summary["complete"] and m.summary["lost"] == 0 and lab.failures() == frozenset()
    (e,) = m.evs
    assert e["ev"] == 1 and e["detected_ms"] is not None and e["sent_while_failed"] == 0
    assert e["restored_ms"] is not None


def test_an_incast_with_trimming_nacks_trimmed_packets_resends_them_and_delivers_every_psn_once(lab):
    """h0 and h1 to h2 while h2's leaf ports serve 200 packets/s (bmv2 queue rate, 32 deep): trimming off,
    then on. Counts and states asserted, never times (the times are bench/endpoint_mrc.py's)."""
    from controller.plan.entries import TableEntry
    from controller.routes import SET_THRESHOLDS, THRESHOLDS
    from endpoint.scenarios import compare_incast

    sch = EndpointSchedule(seconds=3.0, fault_at=0.8, repair_at=2.0, rate=300, min_rto_ms=25)
    c = compare_incast(lab, "h2", modes=("host", "host-trim"), schedule=sch, pps=200, depth=32, trim_qdepth=8)
    assert [p for p in c.pairs] == [("h0", "h2"), ("h1", "h2")]  # h3 shares h2's leaf: no EV between them
    off, on = (m.summary for m in c.modes)
    for m in c.modes:
        s = m.summary
        # every PSN delivered to the application exactly once: all distinct PSNs arrived, duplicates set aside
        assert s["complete"] and (s["lost"], s["icrc_bad"]) == (0, 0) and s["received"] == s["expected"] > 0
        assert all(q["acked"] == q["total"] for q in m.qps) and s["controller_untouched"]
        assert all(q["cwnd_cuts"] is not None for q in m.qps)  # the senders' congestion window was on
    # trimming off: nothing trimmed by any switch or seen trimmed, no NACK
    assert (off["switch"]["trimmed"], off["switch"]["fabric"]["trimmed"], off["trimmed"], off["trimmed_unmatched"]) \
        == (0, 0, 0, 0)
    assert "nack" not in off["resend_delay_ms"] and off["thresholds"] == {"ecn_qdepth": 0, "trim_qdepth": 0}
    # trimming on: the bottleneck trimmed, every packet trimmed there reached h2 and was NACKed (no other
    # switch trimmed it instead: each trimmed packet is counted once by the switches, once by h2)
    seen = on["trimmed"] + on["trimmed_unmatched"]
    assert 0 < on["switch"]["trimmed"] <= seen <= on["switch"]["fabric"]["trimmed"]
    assert on["switch"]["ce_marked"] == on["switch"]["trimmed"]  # ECN off: only trimming marks, and marks each one
    nacked = on["resend_delay_ms"].get("nack", {}).get("count", 0)
    senders_nacks = sum(q["trims"] for q in c.modes[1].qps)
    # the senders heard NACKs, each of a trimmed packet, and resent on a NACK only what was still outstanding. How
    # many NACKs came first is a race this test does not judge (test_transport's unit tests do): on a loaded 2-core
    # machine packets waited past the RTO at the bottleneck, and the EVs a timeout failed took every packet
    # on them, the trimmed ones too, and the NACKs found nothing outstanding (no resend on a NACK at all, once)
    assert 0 < senders_nacks <= seen and nacked <= senders_nacks, (on["resend_delay_ms"], senders_nacks, seen)
    assert on["thresholds"] == {"ecn_qdepth": 0, "trim_qdepth": 8}
    # afterwards the switches hold the program's default thresholds again (reconcile's reset), read back
    with lab.client() as client:
        for name, conn in client.switches.items():
            assert conn.read_default(THRESHOLDS) == [TableEntry(THRESHOLDS, (), SET_THRESHOLDS, (
                ("ecn_qdepth", 0), ("trim_qdepth", 0), ("trim_dscp", 0)), is_default=True)], name


def test_leaf_spraying_with_the_unattended_controller_finds_the_cut_by_itself(lab):
    """leaf-unattended: nobody calls Lab.fail; the FabricService in this process sees the cut link go down
    by its own probes, and all traffic is delivered in the end (counts and events, never times)."""
    ep.enable(lab)
    # The cut lasts 3 s: the service's detection took 0.65-1.4 s on a quiet 2-core lab under this traffic
    # (its probe timeout adapts to the probes' delays, up to 1 s), longer on a loaded CI machine.
    sch = EndpointSchedule(seconds=5.0, fault_at=1.0, repair_at=4.0, rate=200, min_rto_ms=60)
    c = compare(lab, "cut", "p0-t0-0", "p0-t1-1", modes=("leaf-unattended",), pairs=[("h0", "h2"), ("h1", "h3")],
                schedule=sch)
    m = c.modes[0]
    s = m.summary
    assert s["complete"] and (s["lost"], s["icrc_bad"]) == (0, 0) and s["received"] == s["expected"]
    whats = [e["what"] for e in m.events]
    assert "controller: fail recorded and reconciled" not in whats  # nobody told the controller
    assert s["controller_detected_ms"] is not None  # its own probes found this very link down after the cut
    assert "controller (unattended): link_down p0-t0-0--p0-t1-1" in whats
    assert lab.failures() == frozenset()  # nothing left recorded once the scenario is over


def test_a_nic_port_down_at_the_receiver_reaches_the_sender_in_its_acks(lab):
    """h2's plane-1 NIC goes down for a second: h2's acknowledgements (on plane 0) carry its port-state
    bitmap, and h0 sends nothing on plane 1 from the one that said so until the one that says it is up."""
    import time

    ep.enable(lab)
    nic = lab.host("h2").nic(1)
    run = ep.start(lab, [("h0", "h2")], ep.Workload(policy="health", messages=600, rate=200, duration=20,
                                                    recover_probes=4))
    try:
        start = run.started_ns / 1e9
        time.sleep(max(0.0, start + 1.0 - time.monotonic()))  # the schedule: down at 1 s, up at 2 s
        lab.host("h2").run(["ip", "link", "set", nic.intf, "down"])
        time.sleep(max(0.0, start + 2.0 - time.monotonic()))
        lab.host("h2").run(["ip", "link", "set", nic.intf, "up"])
    except BaseException:
        run.kill()
        raise
    report = run.wait()
    s = report.senders["h0"]
    assert s["complete"] and report.totals()["lost"] == 0
    changes = [c for c in s["port_changes"]["h2"] if c[2] == 1]
    assert [(where, up) for _, where, _, up in changes] == [("remote", False), ("remote", True)], changes
    down, up = changes[0][0], changes[1][0]
    assert start + 1.0 <= down < up and start + 2.0 <= up
    bin_s = s["config"]["bin_ms"] / 1e3
    on_plane1 = {ev: bins for ev, bins in s["ev_bins"].items() if int(ev) >> 10 == 1}
    sent_while_down = sum(n for bins in on_plane1.values() for b, n in bins.items()
                          if down + bin_s <= int(b) * bin_s and (int(b) + 1) * bin_s <= up)
    assert on_plane1 and sent_while_down == 0, (changes, on_plane1)
    assert any((int(b) + 1) * bin_s > up + bin_s for bins in on_plane1.values() for b in bins)  # used again
