"""What a runner checks after a run: every byte of every transfer arrived exactly once at the rank that
should have it, with the bytes it was sent, and no transfer started before those it depends on completed.

A runner fills each transfer's payload with `payload(t)` and has its receivers log a `Receipt` per data
segment (which transfer, where in it, how long, at which rank, and whether the bytes matched
`payload(t)[offset:offset+bytes]`); `check_delivery` and `check_dependencies` return one line per problem.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from controller.workload.schedule import Schedule, Transfer

_CYCLE = bytes(range(251)) * 2  # 251 is prime: a segment's bytes tell its position in the transfer


@dataclass(frozen=True, slots=True)
class Receipt:
    """A receiver got `bytes` bytes of transfer `transfer` at byte `offset` of it, at rank `rank`; `intact`:
    they equal payload(transfer)[offset:offset + bytes]."""

    transfer: int
    offset: int
    bytes: int
    rank: int
    intact: bool = True


@dataclass(frozen=True, slots=True)
class Record:
    """One transfer's timeline: posted at `start`, its last byte acknowledged at `end` (seconds, any
    common clock), after `retransmits` retransmitted packets; `plane` where it went (None: its QP's home)."""

    transfer: int
    start: float
    end: float
    retransmits: int = 0
    plane: int | None = None


def payload(t: Transfer) -> bytes:
    """The bytes a runner sends for a transfer: a cycle of 0..250 started at a point that depends on the
    iteration, source rank and buffer offset, so bytes of another transfer or position do not match."""
    seed = (t.iteration * 7919 + t.src * 104729 + t.offset) % 251
    reps = t.bytes // 251 + 2
    return (_CYCLE[seed:seed + 251] * reps)[:t.bytes]


def check_delivery(sched: Schedule, receipts: Iterable[Receipt]) -> list[str]:
    """Every byte of every transfer exactly once, at its destination rank, intact; one line per problem
    (at most 20, then a count)."""
    got: dict[int, list[tuple[int, int]]] = {}
    problems: list[str] = []
    n = len(sched.transfers)
    for r in receipts:
        if not 0 <= r.transfer < n:
            problems.append(f"rank {r.rank} got bytes of unknown transfer {r.transfer}")
            continue
        t = sched.transfers[r.transfer]
        if r.rank != t.dst:
            problems.append(f"transfer {t.id} ({t.src}->{t.dst}, step {t.step} of iteration {t.iteration}): "
                            f"{r.bytes} bytes arrived at rank {r.rank}")
        elif not r.intact:
            problems.append(f"transfer {t.id}: bytes {r.offset}..{r.offset + r.bytes - 1} arrived corrupted")
        elif r.offset < 0 or r.bytes < 0 or r.offset + r.bytes > t.bytes:
            problems.append(f"transfer {t.id}: bytes {r.offset}..{r.offset + r.bytes - 1} are outside its {t.bytes}")
        else:
            got.setdefault(t.id, []).append((r.offset, r.offset + r.bytes))
    for t in sched.transfers:
        spans = sorted(got.get(t.id, []))
        pos, dup = 0, 0
        missing: list[tuple[int, int]] = []
        for a, b in spans:
            if a > pos:
                missing.append((pos, a))
            dup += max(0, min(b, pos) - a)
            pos = max(pos, b)
        if pos < t.bytes:
            missing.append((pos, t.bytes))
        where = f"transfer {t.id} ({t.src}->{t.dst}, step {t.step} of iteration {t.iteration})"
        if missing:
            lost = sum(b - a for a, b in missing)
            problems.append(f"{where}: {lost} of {t.bytes} bytes never arrived (first at byte {missing[0][0]})")
        if dup:
            problems.append(f"{where}: {dup} bytes arrived more than once")
    if len(problems) > 20:
        return problems[:20] + [f"... and {len(problems) - 20} more"]
    return problems


def check_dependencies(sched: Schedule, records: Iterable[Record]) -> list[str]:
    """No transfer started before every transfer in its `after` had completed, and every transfer has a
    record; one line per problem (at most 20, then a count)."""
    at = {r.transfer: r for r in records}
    problems: list[str] = []
    for t in sched.transfers:
        rec = at.get(t.id)
        if rec is None:
            problems.append(f"transfer {t.id} ({t.src}->{t.dst}, step {t.step} of iteration {t.iteration}) has no record")
            continue
        if rec.end < rec.start:
            problems.append(f"transfer {t.id} ends at {rec.end} before it starts at {rec.start}")
        late = [d for d in t.after if d in at and at[d].end > rec.start]
        if late:
            d = max(late, key=lambda i: at[i].end)
            problems.append(f"rank {t.src} started step {t.step} of iteration {t.iteration} (transfer {t.id}) at "
                            f"{rec.start} before transfer {d} of its previous step completed at {at[d].end}")
    if len(problems) > 20:
        return problems[:20] + [f"... and {len(problems) - 20} more"]
    return problems
