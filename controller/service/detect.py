"""Link failure detection from probe outcomes: a pure state machine with hysteresis and flap damping.

Each direction of a link is one detector fed its probes' outcomes in sequence order (True: the probe
arrived in time). It goes down after `fail_after` consecutive losses (K), or on a gray failure: a
loss ratio of at least `gray_loss` over the last `window` probes, all seen since its last change
(judged on a loss, so every decision to fail a link is taken on a lost probe).
Counts start afresh at each change. It comes back after `restore_after` (M) consecutive successes
(default 50: a link losing 20% passes 50 in a row with probability 1e-5), doubled for each recent flap (a
down within `window` probes of the last restore), up to 2**`max_damping` times: a link that keeps
flapping stays down longer each time, so the tables churn less.

`port_evidence` is the second witness for a dead link: K probes missing in a row say only that the
probes were not seen in time; the link's own port counters say whether packets still cross it, and
`trickles` whether most of them are lost on the way (a link that delivers a trickle is not merely late).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum


class Change(Enum):
    """What one probe outcome did to a detector."""

    DOWN = "down"
    UP = "up"


@dataclass(frozen=True, slots=True)
class Thresholds:
    """K, M, the gray-failure window and ratio, and how far flap damping may stretch M."""

    fail_after: int = 3
    restore_after: int = 50
    window: int = 100
    gray_loss: float = 0.1
    max_damping: int = 4

    def __post_init__(self) -> None:
        if self.fail_after < 1 or self.restore_after < 1:
            raise ValueError("fail_after (K) and restore_after (M) must be at least 1")
        if self.window < 1:
            raise ValueError("window must be at least 1 probe")
        if not 0.0 < self.gray_loss <= 1.0:
            raise ValueError("gray_loss must be in (0, 1]")
        if self.max_damping < 0:
            raise ValueError("max_damping must be at least 0")


@dataclass(frozen=True, slots=True)
class Detector:
    """One link direction's detection state; `step` returns the next state and what changed."""

    up: bool = True
    losses: int = 0  # consecutive
    successes: int = 0  # consecutive
    recent: tuple[bool, ...] = field(default=(), repr=False)  # the last `window` outcomes since the last change
    since_change: int = 1 << 30  # probes since the last change (never changed: as good as forever)
    flaps: int = 0  # downs in a row, each within `window` probes of the restore before it
    reason: str = ""  # why the last change happened

    def needed_successes(self, t: Thresholds) -> int:
        """M, stretched by flap damping."""
        return t.restore_after << min(self.flaps, t.max_damping)

    def loss_ratio(self) -> float:
        return (self.recent.count(False) / len(self.recent)) if self.recent else 0.0


def step(d: Detector, ok: bool, t: Thresholds) -> tuple[Detector, Change | None]:
    """Feed one probe outcome."""
    recent = (d.recent + (ok,))[-t.window:]
    losses = 0 if ok else d.losses + 1
    successes = d.successes + 1 if ok else 0
    since = d.since_change + 1
    nxt = replace(d, losses=losses, successes=successes, recent=recent, since_change=since)
    if d.up:
        if losses >= t.fail_after:
            reason = f"{losses} consecutive probes lost"
        elif not ok and len(recent) >= t.window and recent.count(False) >= t.gray_loss * t.window:
            reason = f"{recent.count(False)} of the last {t.window} probes lost"
        else:
            return nxt, None
        flaps = d.flaps + 1 if since <= t.window else 0
        return replace(nxt, up=False, losses=0, successes=0, recent=(), since_change=0, flaps=flaps,
                       reason=reason), Change.DOWN
    if successes >= d.needed_successes(t):
        reason = f"{successes} consecutive probes arrived"
        return replace(nxt, up=True, losses=0, successes=0, recent=(), since_change=0, reason=reason), Change.UP
    return nxt, None


def force_down(d: Detector, t: Thresholds, reason: str) -> Detector:
    """The detector taken down by another signal than its probes (a port that lost carrier): as a
    down by probes would, counts start afresh and a down soon after a restore counts as a flap."""
    flaps = d.flaps + 1 if d.since_change + 1 <= t.window else 0
    return replace(d, up=False, losses=0, successes=0, recent=(), since_change=0, flaps=flaps, reason=reason)


def run(outcomes: list[bool] | tuple[bool, ...], t: Thresholds, d: Detector | None = None
        ) -> tuple[Detector, list[tuple[int, Change]]]:
    """Feed a timeline; the final state and each change with the index of the probe that caused it."""
    d = Detector() if d is None else d
    changes: list[tuple[int, Change]] = []
    for i, ok in enumerate(outcomes):
        d, c = step(d, ok, t)
        if c is not None:
            changes.append((i, c))
    return d, changes


class Evidence(Enum):
    """What a link direction's port counters say between two reads."""

    DEAD = "dead"  # packets left the source port, none arrived at the far port
    ALIVE = "alive"  # packets arrived at the far port: the probes are late, not lost
    UNKNOWN = "unknown"  # too soon to tell, or nothing left the source port (its egress is stalled)


OVERWHELMING = 64  # packets left the source port, none arrived: dead without waiting to settle


def counter_deltas(before: tuple[int, int], after: tuple[int, int]) -> tuple[int, int]:
    """(tx, rx) packets counted between two reads; a counter that went back counts from zero."""
    return tuple(a - b if a >= b else a for b, a in zip(before, after))  # type: ignore[return-value]


def port_evidence(before: tuple[int, int], after: tuple[int, int], elapsed_ns: int, settle_ns: int,
                  patience_ns: int) -> Evidence:
    """Judge a direction from (source port tx, far port rx) packet counts read twice, `elapsed_ns`
    apart. A cut or blackholed direction takes packets at its source port (the switch counts them in
    egress) and delivers none; a merely slow one delivers. Dead needs the reads at least `settle_ns`
    apart (as long as packets take to cross now: sooner, what left may still be on its way), or a
    source port that sent nothing for `patience_ns` while its probes went missing (a wedged port), or
    OVERWHELMING packets gone in without one out (more than a slow far end keeps of one port's traffic
    between two reads on the lab; it spares a cut the whole settling time on a busy fabric).
    A counter that went back (a switch restarted) counts from zero."""
    dtx, drx = counter_deltas(before, after)
    if drx > 0:
        return Evidence.ALIVE
    if (dtx > 0 and elapsed_ns >= settle_ns) or dtx >= OVERWHELMING or elapsed_ns >= patience_ns:
        return Evidence.DEAD
    return Evidence.UNKNOWN


TRICKLE_LOSS = 0.5  # of what left the source port, at least this much never reached the far port: lost, not late
TRICKLE_TIMEOUTS = 4  # judged over at least this many probe timeouts: what is on its way is then a quarter at most


def trickles(before: tuple[int, int], after: tuple[int, int]) -> bool:
    """Whether a direction whose probes keep missing while its far port still receives (ALIVE) loses most of
    what enters it: at least TRICKLE_LOSS of the packets that left the source port between two reads never
    reached the far port. Read at least TRICKLE_TIMEOUTS probe timeouts apart, what is still on its way (at
    most a timeout's worth while probes are only late) stays under that; a link shaped below what its own
    probes need, which delivers one in ten of them, each long after its timeout, is well over it."""
    dtx, drx = counter_deltas(before, after)
    return dtx > 0 and dtx - drx >= TRICKLE_LOSS * dtx
