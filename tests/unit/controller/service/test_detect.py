"""The link detector (controller.service.detect) over synthetic probe timelines: K losses -> down,
M successes -> up, gray loss over a window -> down, flap damping bounds churn."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.service.detect import Change, Detector, Evidence, Thresholds, force_down, port_evidence, run, step

thresholds = st.builds(Thresholds, fail_after=st.integers(1, 5), restore_after=st.integers(1, 6),
                       window=st.integers(1, 12), gray_loss=st.sampled_from([0.1, 0.25, 0.5, 1.0]),
                       max_damping=st.integers(0, 3))
timelines = st.lists(st.booleans(), max_size=120)


def check_invariants(outcomes: list[bool], t: Thresholds, changes: list[tuple[int, Change]]) -> None:
    """Every change is justified by the timeline alone (an oracle independent of the detector's fields)."""
    kinds = [c for _, c in changes]
    assert kinds == [Change.DOWN, Change.UP] * (len(kinds) // 2) + [Change.DOWN] * (len(kinds) % 2)
    last = -1  # index of the previous change
    flaps = 0
    last_up = None  # index of the last restore
    for i, c in changes:
        tail = outcomes[last + 1 : i + 1]  # what the detector saw since its last change
        if c is Change.DOWN:
            run_of_losses = len(tail) - len("".join("x" if o else "." for o in tail).rstrip("."))
            window = tail[-t.window:]
            gray = not tail[-1] and len(window) >= t.window and window.count(False) >= t.gray_loss * t.window
            assert run_of_losses >= t.fail_after or gray, (i, tail)
            flaps = flaps + 1 if last_up is not None and i - last_up <= t.window else 0
        else:
            need = t.restore_after << min(flaps, t.max_damping)
            assert len(tail) >= need and all(tail[-need:]), (i, need, tail)
            last_up = i
        last = i
    # and nothing was missed: after the last change, the condition for the next one never held
    tail = outcomes[last + 1 :]
    up = not kinds or kinds[-1] is Change.UP
    for n in range(1, len(tail) + 1):
        seen = tail[:n]
        if up:
            run_of_losses = len(seen) - len("".join("x" if o else "." for o in seen).rstrip("."))
            window = seen[-t.window:]
            assert run_of_losses < t.fail_after
            assert not (not seen[-1] and len(window) >= t.window and window.count(False) >= t.gray_loss * t.window)
        else:
            need = t.restore_after << min(flaps, t.max_damping)
            assert not (len(seen) >= need and all(seen[-need:]))


@given(timelines, thresholds)
@settings(max_examples=400, deadline=None)
def test_every_change_is_justified_and_none_is_missed(outcomes, t):
    _, changes = run(outcomes, t)
    check_invariants(outcomes, t, changes)


def test_exhaustively_every_timeline_up_to_12_probes():
    t = Thresholds(fail_after=2, restore_after=3, window=4, gray_loss=0.5, max_damping=2)
    for n in range(13):
        for outcomes in itertools.product((True, False), repeat=n):
            _, changes = run(list(outcomes), t)
            check_invariants(list(outcomes), t, changes)


@given(st.integers(1, 8), st.integers(0, 50))
@settings(deadline=None)
def test_k_consecutive_losses_fail_a_clean_link_on_the_kth(k, clean):
    t = Thresholds(fail_after=k, window=1000)
    d, changes = run([True] * clean + [False] * k, t)
    assert changes == [(clean + k - 1, Change.DOWN)]
    assert not d.up and d.reason == f"{k} consecutive probes lost"


@given(st.integers(1, 8), st.integers(1, 8))
@settings(deadline=None)
def test_m_consecutive_successes_restore_and_a_loss_restarts_the_count(k, m):
    t = Thresholds(fail_after=k, restore_after=m, window=1000)
    outcomes = [False] * k + [True] * (m - 1) + [False] + [True] * m
    d, changes = run(outcomes, t)
    assert changes == [(k - 1, Change.DOWN), (len(outcomes) - 1, Change.UP)]
    assert d.up


def test_no_change_on_a_clean_link():
    d, changes = run([True] * 5000, Thresholds())
    assert changes == [] and d.up and d.loss_ratio() == 0.0


@pytest.mark.parametrize("seed", range(20))
def test_gray_loss_of_20_percent_fails_the_link_within_two_windows(seed):
    rng = random.Random(seed)
    t = Thresholds(fail_after=50, window=100, gray_loss=0.1)  # K out of reach: only the ratio can fire
    outcomes = [rng.random() >= 0.2 for _ in range(200)]
    _, changes = run(outcomes, t)
    assert changes and changes[0][1] is Change.DOWN and changes[0][0] < 200
    d, _ = run(outcomes[: changes[0][0] + 1], t)
    assert d.reason.endswith(f"of the last {t.window} probes lost")
    assert sum(1 for _, c in changes if c is Change.UP) == 0  # M = 50 in a row: not at 20% loss


@pytest.mark.parametrize("seed", range(5))
def test_one_percent_random_loss_does_not_fail_a_link(seed):
    rng = random.Random(seed)
    _, changes = run([rng.random() >= 0.01 for _ in range(5000)], Thresholds(fail_after=3, gray_loss=0.1))
    assert changes == []


@given(st.integers(3, 10), st.integers(1, 60), st.integers(1, 6), st.integers(0, 4))
@settings(max_examples=60, deadline=None)  # no per-example deadline on a shared, loaded machine
def test_flapping_link_damping_bounds_restores(down_for, up_for, m, damping):
    """A link flapping forever (down_for losses, up_for successes, repeated) is restored at most
    until M * 2**flaps exceeds up_for (then it stays down): churn is bounded, not periodic."""
    t = Thresholds(fail_after=3, restore_after=m, window=100, gray_loss=1.0, max_damping=damping)
    period = [False] * down_for + [True] * up_for
    _, changes = run(period * 200, t)
    restores = sum(1 for _, c in changes if c is Change.UP)
    if up_for < m << damping:
        assert restores <= max(0, math.ceil(math.log2((up_for + 1) / m))) + 1
        assert changes[-1][1] is Change.DOWN
    else:  # up periods long enough even at full damping: restored every period (it does come back)
        assert restores >= 199


def test_bad_thresholds_are_refused():
    with pytest.raises(ValueError, match="fail_after"):
        Thresholds(fail_after=0)
    with pytest.raises(ValueError, match="gray_loss"):
        Thresholds(gray_loss=0)


def test_step_is_pure():
    d = Detector()
    t = Thresholds(fail_after=1)
    d2, c = step(d, False, t)
    assert c is Change.DOWN and d.up and not d2.up


def test_the_detectors_defaults_are_those_of_fabricctl_run() -> None:
    """Thresholds() (what the library and LinkJudge's users get) and `fabricctl run`'s options name the same
    K, M, window, gray ratio and damping: one of them changed alone would make the lab and the library disagree."""
    from fabricctl.service import run_cmd

    defaults = {p.name: p.default for p in run_cmd.params}
    t = Thresholds()
    assert (t.fail_after, t.restore_after, t.window, t.gray_loss, t.max_damping) == (
        defaults["k"], defaults["m"], defaults["window"], defaults["gray_loss"], defaults["max_damping"]) == (
        3, 50, 100, 0.1, 4)


def test_a_forced_down_starts_counts_afresh_and_counts_a_flap_within_the_window() -> None:
    """force_down (carrier lost) leaves the detector as a down by probes would: counts zeroed, a flap counted when
    it comes within `window` probes of the last change (the probe it stands for included), none after."""
    t = Thresholds(fail_after=3, restore_after=2, window=10, max_damping=4)
    busy = Detector(losses=2, successes=1, recent=(True, False, False), flaps=1)
    soon = force_down(replace(busy, since_change=9), t, "carrier lost")
    assert soon == Detector(up=False, losses=0, successes=0, recent=(), since_change=0, flaps=2, reason="carrier lost")
    late = force_down(replace(busy, since_change=10), t, "carrier lost")
    assert late == Detector(up=False, losses=0, successes=0, recent=(), since_change=0, flaps=0, reason="carrier lost")
    # M (2) stretched by two flaps: up after exactly 8 probes in a row
    assert run([True] * 8, t, soon)[1] == [(7, Change.UP)]
    assert run([True] * 2, t, late)[1] == [(1, Change.UP)]


def test_a_down_and_an_up_by_probes_start_counts_afresh() -> None:
    t = Thresholds(fail_after=3, restore_after=2, window=10)
    d, changes = run([True, False, False, False], t)
    assert changes == [(3, Change.DOWN)]
    assert d == Detector(up=False, losses=0, successes=0, recent=(), since_change=0, flaps=0,
                         reason="3 consecutive probes lost")
    d, changes = run([True, True], t, d)
    assert changes == [(1, Change.UP)]
    assert d == Detector(up=True, losses=0, successes=0, recent=(), since_change=0, flaps=0,
                         reason="2 consecutive probes arrived")


def test_loss_ratio_is_the_lost_share_of_the_window_since_the_last_change() -> None:
    t = Thresholds(fail_after=3, restore_after=2, window=10)
    assert Detector().loss_ratio() == 0.0
    assert run([True, False, True, True], t)[0].loss_ratio() == 0.25


def test_gray_loss_above_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^gray_loss must be in \(0, 1\]$"):
        Thresholds(gray_loss=1.5)
    assert Thresholds(gray_loss=1.0).gray_loss == 1.0


def test_one_packet_out_and_none_in_after_settling_is_a_dead_direction() -> None:
    assert port_evidence((7, 3), (8, 3), elapsed_ns=100, settle_ns=100, patience_ns=1000) is Evidence.DEAD
    assert port_evidence((7, 3), (7, 3), elapsed_ns=100, settle_ns=100, patience_ns=1000) is Evidence.UNKNOWN
