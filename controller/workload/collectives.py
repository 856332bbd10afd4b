"""The collectives' algorithms as steps of flows between ranks, and the bus-bandwidth factors.

Every collective works on a buffer cut into n chunks (n ranks); a flow of a step moves a contiguous run
of chunks from one rank to another. Sizes follow nccl-tests (doc/PERFORMANCE.md): `size` is the
AllReduce buffer of each rank, the AllGather output (n chunks, one contributed by each rank), the
ReduceScatter input (n chunks, one left reduced on each rank), and the all-to-all send buffer of each
rank (chunk d goes to rank d).

    allreduce      ring: n-1 reduce-scatter steps then n-1 all-gather steps; rank r sends to r+1
    allgather      ring: n-1 steps, rank r sends chunk (r - k) mod n to r+1 at step k
    reducescatter  ring: n-1 steps, rank r sends chunk (r - k - 1) mod n to r+1 at step k
    alltoall       one step: every rank sends chunk d to every rank d != r at once (MoE dispatch)
    allreduce_hd   halving-doubling (Rabenseifner): log2 n recursive-halving reduce-scatter steps
                   (partner r xor n/2, n/4, ... 1; half the chunks still held each), then log2 n
                   recursive-doubling all-gather steps (partner r xor 1, 2, ... n/2); n a power of two
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # numpy only for the fabric-scale patterns: the labs' schedules do without it
    import numpy as np

Collective = Literal["allreduce", "allgather", "reducescatter", "alltoall", "allreduce_hd"]
COLLECTIVES: tuple[Collective, ...] = ("allreduce", "allgather", "reducescatter", "alltoall", "allreduce_hd")
NAMES = {"allreduce": "ring AllReduce", "allgather": "ring AllGather", "reducescatter": "ring ReduceScatter",
         "alltoall": "all-to-all", "allreduce_hd": "halving-doubling AllReduce"}


class CollectiveError(ValueError):
    """A collective that cannot run on these ranks (one line)."""


@dataclass(frozen=True, slots=True)
class Flow:
    """Rank `src` sends chunks first_chunk .. first_chunk + chunks - 1 to rank `dst` in one step."""

    src: int
    dst: int
    chunk: int
    chunks: int = 1


@dataclass(frozen=True)
class Pattern:
    """Steps that move the same flows (src[i] -> dst[i], chunks[i] chunks each): `repeat` of them in a
    collective. What the fabric-scale analysis works on: a ring has one pattern repeated 2(n-1) times."""

    src: np.ndarray
    dst: np.ndarray
    chunks: np.ndarray
    repeat: int


def check(kind: str, n: int) -> None:
    """Raise CollectiveError when `kind` cannot run over n ranks."""
    if kind not in COLLECTIVES:
        raise CollectiveError(f"collective {kind!r} is not one of {', '.join(COLLECTIVES)}")
    if n < 2:
        raise CollectiveError(f"a collective needs at least 2 ranks, got {n}")
    if kind == "allreduce_hd" and n & (n - 1):
        raise CollectiveError(f"halving-doubling AllReduce needs a power-of-two number of ranks, got {n}")


def step_count(kind: Collective, n: int) -> int:
    """Steps of one run of the collective."""
    check(kind, n)
    if kind == "allreduce":
        return 2 * (n - 1)
    if kind in ("allgather", "reducescatter"):
        return n - 1
    if kind == "alltoall":
        return 1
    return 2 * (n.bit_length() - 1)


def bus_factor(kind: Collective, n: int) -> float:
    """busbw / algbw (nccl-tests doc/PERFORMANCE.md): 2(n-1)/n for AllReduce, (n-1)/n for AllGather,
    ReduceScatter and all-to-all. What each rank's link must carry, as a fraction of `size`, per second."""
    check(kind, n)
    return 2 * (n - 1) / n if kind in ("allreduce", "allreduce_hd") else (n - 1) / n


def step_flows(kind: Collective, n: int, step: int) -> list[Flow]:
    """The flows of one step, by source rank."""
    steps = step_count(kind, n)
    if not 0 <= step < steps:
        raise CollectiveError(f"step {step} is not in 0..{steps - 1}")
    if kind == "alltoall":
        return [Flow(r, d, d) for r in range(n) for d in range(n) if d != r]
    if kind == "allreduce_hd":
        log = n.bit_length() - 1
        if step < log:  # recursive halving: send the half of the held block that the partner keeps
            dist = n >> (step + 1)
            return [Flow(r, r ^ dist, ((r >> (log - step)) << (log - step)) | (~r & dist), dist)
                    for r in range(n)]
        dist = 1 << (step - log)  # recursive doubling: send the block held, of `dist` chunks
        return [Flow(r, r ^ dist, r & ~(dist - 1), dist) for r in range(n)]
    if kind == "allreduce":
        shift = step if step < n - 1 else step - (n - 1) - 1
    elif kind == "allgather":
        shift = step
    else:
        shift = step + 1
    return [Flow(r, (r + 1) % n, (r - shift) % n) for r in range(n)]


def patterns(kind: Collective, n: int, max_flows: int = 50_000_000) -> list[Pattern]:
    """The collective's distinct steps as numpy arrays (for fabric-scale load computation); raise
    CollectiveError when one step holds more than max_flows flows (all-to-all over many ranks)."""
    import numpy as np

    check(kind, n)
    r = np.arange(n, dtype=np.int64)
    if kind in ("allreduce", "allgather", "reducescatter"):
        return [Pattern(r, (r + 1) % n, np.ones(n, dtype=np.int64), step_count(kind, n))]
    if kind == "alltoall":
        if n * (n - 1) > max_flows:
            raise CollectiveError(f"all-to-all over {n} ranks is {n * (n - 1):,} flows a step, more than the "
                                  f"{max_flows:,} this analysis holds; use fewer ranks (--ranks)")
        src = np.repeat(r, n - 1)
        off = np.tile(np.arange(1, n, dtype=np.int64), n)
        return [Pattern(src, (src + off) % n, np.ones(n * (n - 1), dtype=np.int64), 1)]
    out: list[Pattern] = []
    log = n.bit_length() - 1
    for j in range(log):  # the halving step at distance d and the doubling step at d move the same flows
        dist = n >> (j + 1)
        out.append(Pattern(r, r ^ dist, np.full(n, dist, dtype=np.int64), 2))
    return out


def chunk_span(size: int, n: int, first: int, count: int = 1) -> tuple[int, int]:
    """(byte offset, bytes) of chunks first .. first+count-1 of a `size`-byte buffer cut into n chunks
    (the first size % n chunks one byte longer)."""
    base, extra = divmod(size, n)

    def start(c: int) -> int:
        return c * base + min(c, extra)

    return start(first), start(first + count) - start(first)
