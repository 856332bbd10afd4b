"""The demo's recovery judgement (mininet_labs.kernel.demo.never_recovered) on traffic results made by hand: a QP
that received nothing after the cut although its sender went on is a failure to recover; one whose sender had
stopped before the reconcile lost its tail in the cut; a loss begun after the reconcile is not the cut's."""

from __future__ import annotations

import pytest

pytest.importorskip("scapy")

from mininet_labs.kernel.demo import never_recovered  # noqa: E402
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
