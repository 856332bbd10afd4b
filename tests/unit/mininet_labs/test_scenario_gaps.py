"""A failure scenario's QP outcome sets each run of lost packets against spans of the run (no lab)."""

from __future__ import annotations

from mininet_labs.scenarios import QpOutcome, _spans


def outcome(gaps: list[tuple[float | None, float | None, int]]) -> QpOutcome:
    return QpOutcome("h2", "h0", 0x100, 0, False, 225, 225 - sum(n for _, _, n in gaps), sum(n for _, _, n in gaps),
                     0, None, {0: 225}, gaps)


def test_a_loss_counts_only_where_its_run_reaches_into_a_span() -> None:
    q = outcome([(100.0, 180.0, 2), (1000.0, 1100.0, 3), (2900.0, None, 1)])
    assert q.lost_during([(1050.0, 1300.0)]) == 3  # begins before the span, ends inside it
    assert q.lost_during([(1100.0, 1300.0)]) == 0  # delivered again as the span begins
    assert q.lost_during([(150.0, 160.0), (2950.0, 3000.0)]) == 2 + 1  # inside one span; open to the end
    assert q.lost_during([(200.0, 900.0)]) == 0
    assert outcome([(None, 50.0, 4)]).lost_during([(0.0, 10.0)]) == 4  # lost from the start
    assert _spans(q.gaps) == "100.0-180.0 (2), 1000.0-1100.0 (3), 2900.0-end (1)"
