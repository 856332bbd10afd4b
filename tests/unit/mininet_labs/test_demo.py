"""The demo's recovery judgement (mininet_labs.demo.never_recovered) on traffic results made by hand: a QP
that received nothing after the cut although its sender went on is a failure to recover; one whose sender had
stopped before the reconcile lost its tail in the cut; a loss begun after the reconcile is not the cut's."""

from __future__ import annotations

import pytest

pytest.importorskip("scapy")

from mininet_labs.demo import loss_window_ms, never_recovered  # noqa: E402
from mininet_labs.receiver import Gap, QpStats, RecvResult  # noqa: E402
from mininet_labs.traffic import QpSent, SendResult  # noqa: E402
from mininet_labs.trafficrun import TrafficReport  # noqa: E402

RECONCILED = 5_000


def report(last_sent_ns: int, gap: Gap | None) -> TrafficReport:
    """h0 sends 10 packets on QP 7 to h2 (its last one at last_sent_ns); h2 received them but for `gap`."""
    gaps = [gap] if gap else []
    got = QpStats("h0", 7, 10, received=10 - (gap.missing if gap else 0), lost=gap.missing if gap else 0,
                  per_plane={0: 10}, gaps=gaps)
    sent = SendResult("h0", 10, 1.0, [QpSent("h2", 7, 0, 10, 1, {0: 10}, last_sent_ns)])
    return TrafficReport({"h0": sent}, {"h2": RecvResult("h2", 10, 0, 0, 1.0, [got])}, 1.0)


def test_a_qp_that_got_nothing_after_the_cut_while_its_sender_went_on_never_recovered() -> None:
    tail = Gap(after=3, before=None, missing=6, last_before_ns=RECONCILED - 100)
    assert never_recovered(report(RECONCILED + 900, tail), RECONCILED) == [("h0", "h2", 7)]


def test_a_qp_whose_sender_stopped_inside_the_cut_lost_its_tail_but_did_not_fail_to_recover() -> None:
    tail = Gap(after=3, before=None, missing=6, last_before_ns=RECONCILED - 100)
    assert never_recovered(report(RECONCILED - 10, tail), RECONCILED) == []


def test_a_closed_gap_or_a_loss_begun_after_the_reconcile_is_not_a_failure_to_recover() -> None:
    closed = Gap(after=3, before=6, missing=2, last_before_ns=RECONCILED - 100, first_after_ns=RECONCILED + 50)
    late_tail = Gap(after=8, before=None, missing=1, last_before_ns=RECONCILED + 800)
    assert never_recovered(report(RECONCILED + 900, closed), RECONCILED) == []
    assert never_recovered(report(RECONCILED + 900, late_tail), RECONCILED) == []
    assert never_recovered(report(RECONCILED + 900, None), RECONCILED) == []


def test_the_timeline_sums_every_receiver_per_plane_from_the_senders_start_with_the_events() -> None:
    from mininet_labs.demo import delivered_timeline

    started = 1_000_000_000  # ns; bins of 10 ms: the senders started in bin 100
    got = [RecvResult("h2", 3, 0, 0, 1.0, [], {"bin_ms": 10.0, "planes": {0: {100: 2, 102: 1}, 1: {101: 4}}}),
           RecvResult("h3", 2, 0, 0, 1.0, [], {"bin_ms": 10.0, "planes": {0: {100: 1}, 1: {103: 1}}})]
    doc = delivered_timeline(TrafficReport({}, {r.host: r for r in got}, 1.0), started,
                             [(started + 15_000_000, "link cut"), (started + 17_500_000, "failure reconciled")])
    assert doc == {"timeline": {"bin_ms": 10.0, "planes": {0: [3, 0, 1, 0], 1: [0, 4, 0, 1]}},
                   "events": [{"t_ms": 15.0, "what": "link cut"}, {"t_ms": 17.5, "what": "failure reconciled"}]}
    assert delivered_timeline(TrafficReport({}, {}, 0.0), started, []) == {"timeline": {"bin_ms": 0, "planes": {}},
                                                                           "events": []}


def test_the_demo_plot_is_a_png_of_its_timeline(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from fabricctl.labdemo import plot_doc
    from mininet_labs import plot

    result = {"dataplane": "kernel", "link": "p0-t0-0 -- p0-t1-1",
              "timeline": {"bin_ms": 10.0, "planes": {0: [5, 5, 0, 5], 1: [5, 5, 5, 5]}},
              "events": [{"t_ms": 20.0, "what": "link cut"}],
              "checks": [{"check": "plane 1 QPs", "ok": True, "result": "24 QPs, 0 packets lost", "lost": 0},
                         {"check": "plane 0 loss window", "ok": True, "result": "...", "loss_window_ms": 30.0,
                          "loss_window_median_ms": 20.0, "lost": 5}]}
    doc = plot_doc(result)
    assert doc["summary"] == {"loss_window_ms": {"median": 20.0}, "lost_elsewhere": 0}
    assert doc["failure"] == "link p0-t0-0 -- p0-t1-1" and doc["events"] == result["events"]
    out = plot.timeline(doc, tmp_path / "demo.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_loss_reaching_past_the_reconcile_is_counted_and_loss_that_ended_before_it_is_not() -> None:
    from mininet_labs.demo import lost_between

    mended = RECONCILED + 10_000
    healed = Gap(after=3, before=6, missing=2, last_before_ns=RECONCILED - 100, first_after_ns=RECONCILED + 50)
    assert lost_between(report(RECONCILED + 900, healed), RECONCILED + 200, mended) == []
    untold = Gap(after=3, before=6, missing=2, last_before_ns=RECONCILED - 100, first_after_ns=mended + 50)
    assert lost_between(report(RECONCILED + 900, untold), RECONCILED + 200, mended) == [(("h0", "h2", 7), 2)]
    tail_after_mend = Gap(after=8, before=None, missing=1, last_before_ns=mended + 10)
    assert lost_between(report(mended + 900, tail_after_mend), RECONCILED + 200, mended) == []
    cut_tail = Gap(after=3, before=None, missing=6, last_before_ns=RECONCILED - 100)  # its sender stopped in the cut
    assert lost_between(report(RECONCILED + 100, cut_tail), RECONCILED + 200, mended) == []
    assert lost_between(report(mended, cut_tail), RECONCILED + 200, mended) == [(("h0", "h2", 7), 6)]


class LateSenders:
    """A traffic run whose senders began sending `late_s` after its start time (processes that came up late on
    a loaded machine); wait_sending returns once they have."""

    def __init__(self, late_s: float) -> None:
        import time

        self.started_ns = time.monotonic_ns() + 100_000_000  # start_delay
        self.sending_ns = self.started_ns + int(late_s * 1e9)

    def wait_sending(self, timeout: float = 60.0) -> int:
        import time

        time.sleep(max(0.0, (self.sending_ns - time.monotonic_ns()) / 1e9))
        return self.sending_ns

    def wait(self) -> TrafficReport:
        return TrafficReport({}, {}, 1.0)

    def stop(self) -> None:
        import time

        self.stopped_ns = time.monotonic_ns()

    def kill(self) -> None:
        pass


class ScheduleLab:
    """What the demo's scenario asks of a Lab, recording when it cut and mended the link."""

    hosts = ["h0", "h1", "h2", "h3"]
    model = program = options = None

    def __init__(self, run: LateSenders, reconcile_s: float = 0.0, cut_s: float = 0.0) -> None:
        self.run, self.at_ns, self.reconcile_s, self.cut_s = run, {}, reconcile_s, cut_s

    def traffic(self, **_: object) -> TrafficReport:
        return TrafficReport({}, {}, 1.0)

    def start_traffic(self, **kwargs: object) -> LateSenders:
        self.traffic_kwargs = kwargs
        return self.run

    def _at(self, what: str, *_: object) -> object:
        import time
        from types import SimpleNamespace

        self.at_ns[what] = time.monotonic_ns()
        return SimpleNamespace(touched=[])

    def cut_link(self, *a: object) -> object:
        import time

        time.sleep(self.cut_s)
        return self._at("cut", *a)  # when the cut's command returned

    def mend_link(self, *a: object) -> object:
        return self._at("mend", *a)

    def fail(self, *a: object) -> object:
        import time

        time.sleep(self.reconcile_s)
        return self._at("fail", *a)

    def restore(self, *a: object) -> object:
        return self._at("restore", *a)

    def install(self, **_: object) -> dict:
        return {}


def test_the_cut_comes_while_every_sender_is_sending_however_late_they_came_up(monkeypatch) -> None:
    from types import SimpleNamespace

    from mininet_labs import demo

    monkeypatch.setattr(demo.planning, "failure_change", lambda *a: SimpleNamespace(touched=[]))
    run = LateSenders(late_s=0.6)
    lab = ScheduleLab(run)
    demo._scenario(lab, lambda *a, **k: None, rate=400.0, seconds=1.0, timeline={}, failover=True)
    # cut once the last sender has been sending a while, not at 0.4 x seconds after the start time it was given;
    # mended as long after the cut as the schedule says (0.35 x seconds)
    assert lab.at_ns["cut"] >= run.sending_ns + int(demo.LEAD_S * 1e9)
    assert lab.at_ns["mend"] >= lab.at_ns["cut"] + 350_000_000


def test_a_reconcile_that_comes_late_is_watched_for_loss_before_the_mend(monkeypatch) -> None:
    from types import SimpleNamespace

    from mininet_labs import demo

    monkeypatch.setattr(demo.planning, "failure_change", lambda *a: SimpleNamespace(touched=[]))
    run = LateSenders(late_s=0.0)
    lab = ScheduleLab(run, reconcile_s=0.5)  # returns after the mend was due (0.75 s after the senders began)
    demo._scenario(lab, lambda *a, **k: None, rate=400.0, seconds=1.0, timeline={}, failover=True)
    assert lab.at_ns["mend"] >= lab.at_ns["fail"] + int((demo.SETTLE_MS + demo.WATCH_MS) * 1e6)


def test_the_senders_go_round_every_destination_until_stopped_once_the_mend_was_watched(monkeypatch) -> None:
    from types import SimpleNamespace

    from mininet_labs import demo

    monkeypatch.setattr(demo.planning, "failure_change", lambda *a: SimpleNamespace(touched=[]))
    run = LateSenders(late_s=0.0)
    lab = ScheduleLab(run, reconcile_s=1.2)  # returns after the senders' planned 1 s: they go on, then stop
    demo._scenario(lab, lambda *a, **k: None, rate=400.0, seconds=1.0, timeline={}, failover=True)
    assert lab.traffic_kwargs["interleave"] is True
    # their bound: the messages of OVERRUN_BOUND_S past the run's seconds, 3 destinations, 400 packets/s
    assert lab.traffic_kwargs["messages"] == int(400.0 * (1.0 + demo.OVERRUN_BOUND_S) / 3)
    # past the run's planned second, after the mend and the restore
    assert run.started_ns + 1_000_000_000 < lab.at_ns["mend"] < lab.at_ns["restore"] < run.stopped_ns


def test_the_loss_window_bound_stretches_only_past_a_late_reconcile() -> None:
    from mininet_labs.demo import LOSS_WINDOW_BOUND_MS, SETTLE_MS, loss_window_bound

    assert loss_window_bound(0.0) == loss_window_bound(240.0) == LOSS_WINDOW_BOUND_MS  # told in time
    assert loss_window_bound(1505.0) == 1505.0 + SETTLE_MS
    assert loss_window_bound(None) == LOSS_WINDOW_BOUND_MS  # untold: however long the cut's own command took


def test_an_untold_cut_is_mended_later_than_the_bound_after_the_cut_returned(monkeypatch) -> None:
    from types import SimpleNamespace

    from mininet_labs import demo

    monkeypatch.setattr(demo.planning, "failure_change", lambda *a: SimpleNamespace(touched=[]))
    run = LateSenders(late_s=0.0)
    lab = ScheduleLab(run, cut_s=0.6)  # the cut's command returned late: the drop may have begun only then
    checks: dict = {}
    demo._scenario(lab, lambda name, ok, result, **k: checks.setdefault(name, (ok, result, k)), rate=400.0,
                   seconds=2.0, timeline={}, failover=False)
    assert lab.at_ns["mend"] - lab.at_ns["cut"] > demo.LOSS_WINDOW_BOUND_MS * 1e6
    assert checks["plane 0 loss window"][2]["bound_ms"] == demo.LOSS_WINDOW_BOUND_MS
    assert checks["cut + fail link"][2]["cut_ms"] >= 600 and checks["cut + fail link"][2]["reconcile_ms"] is None


def test_a_qp_whose_first_packets_went_into_the_cut_has_its_window_from_the_cut_to_its_first_delivery() -> None:
    cut = 5_000_000_000
    late_head = QpStats("h0", 7, 10, received=7, lost=3, gaps=[Gap(-1, 3, 3, None, cut + 80_000_000)])
    assert loss_window_ms(late_head, cut) == 80.0
    closed = QpStats("h0", 8, 10, received=7, lost=3,
                     gaps=[Gap(-1, 0, 1, None, cut - 5_000_000), Gap(2, 5, 2, cut, cut + 60_000_000, rx_ms=60.0)])
    assert loss_window_ms(closed, cut) == 60.0  # a head lost before the cut is not the cut's
    tail = QpStats("h0", 9, 10, received=8, lost=2, gaps=[Gap(7, None, 2, cut - 1_000_000)])
    assert loss_window_ms(tail, cut) is None  # a tail lost in the cut never closed
