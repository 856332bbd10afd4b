"""A collective job as a schedule of transfers: who sends which bytes to whom, on which QP and plane,
at which step, and which transfers must have completed before each may start.

    from controller.workload import Workload, schedule, grid
    job = schedule(Workload("allreduce", size=1 << 20, iterations=4, warmup=1, qps=4, strategy="round_robin"),
                   grid(planes=2, leaves=4, hosts_per_leaf=2, spec="uneven", n=4))
    for t in job.transfers: ... t.src_host, t.dst_host, t.qp, t.offset, t.bytes, t.after ...

Dependencies (NCCL semantics): a rank starts step k+1 when everything it sent and everything it received
at step k has completed, so one slow transfer stretches every later step of the ranks it feeds. Step 0
of an iteration follows the rank's last step of the iteration before (collectives called back to back).
`Transfer.after` lists exactly those transfers' ids.

QP scaling (Meta's comparison): `qps` QPs per connection (ordered rank pair). 'split' cuts every message
(one connection's flow of one step) into `qps` equal parts, part q on QP q; 'round_robin' posts each
message whole on the connection's next QP (message m on QP m mod qps, counted over the whole run).
QP number: qp_base + QP index; a QP's home plane is its index mod the planes (as the lab's senders do with
--plane-mode qp), its RoCEv2 UDP source port 0xC000 | (QP number & 0x3FFF) unless `sport` fixes one for all.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from controller.workload.collectives import Collective, CollectiveError, bus_factor, check, chunk_span, step_count, \
    step_flows
from controller.workload.placement import Placement

Strategy = Literal["split", "round_robin"]
STRATEGIES: tuple[Strategy, ...] = ("split", "round_robin")
SPORT_BASE = 0xC000
MAX_TRANSFERS = 2_000_000  # a schedule of Transfer objects is for labs; the fabric-scale analysis uses patterns


@dataclass(frozen=True)
class Workload:
    """What the job runs: the collective, its size in bytes (nccl-tests' meaning, collectives.py),
    measured iterations after `warmup` unmeasured ones, QPs per connection and how messages use them."""

    collective: Collective
    size: int
    iterations: int = 1
    warmup: int = 0
    qps: int = 1
    strategy: Strategy = "round_robin"
    qp_base: int = 0x100
    sport: int | None = None  # one UDP source port for every QP (a NIC that does not spread them); None: per QP

    def __post_init__(self) -> None:
        check(self.collective, 2)
        problems = []
        if not 1 <= self.size <= 1 << 40:
            problems.append(f"size must be 1 byte to 1 TiB, got {self.size}")
        if not 1 <= self.iterations <= 100_000:
            problems.append(f"iterations must be 1 to 100000, got {self.iterations}")
        if not 0 <= self.warmup <= 100_000:
            problems.append(f"warm-up iterations must be 0 to 100000, got {self.warmup}")
        if not 1 <= self.qps <= 256:
            problems.append(f"QPs per connection must be 1 to 256, got {self.qps}")
        if self.strategy not in STRATEGIES:
            problems.append(f"QP strategy {self.strategy!r} is not one of {', '.join(STRATEGIES)}")
        if not 2 <= self.qp_base <= (1 << 24) - 1 - self.qps:
            problems.append(f"qp_base must leave 24-bit QP numbers from 2 up, got {self.qp_base}")
        if self.sport is not None and not 0 <= self.sport <= 0xFFFF:
            problems.append(f"UDP source port must be 0..65535, got {self.sport}")
        if problems:
            raise CollectiveError(problems[0])

    def qp_number(self, qp_index: int) -> int:
        return self.qp_base + qp_index

    def udp_sport(self, qp_index: int) -> int:
        """The RoCEv2 UDP source port of a QP (mininet_labs' senders: 0xC000 | QP number low 14 bits)."""
        return self.sport if self.sport is not None else SPORT_BASE | (self.qp_number(qp_index) & 0x3FFF)


@dataclass(frozen=True, slots=True)
class Transfer:
    """One message part: rank `src` (on src_host) sends `bytes` bytes at `offset` of its buffer (chunks
    chunk .. chunk+chunks-1, part `part` of the message) to rank `dst` on QP `qp` in `plane`, at `step` of
    `iteration` (warm-up iterations come first, `warmup` True). It may start once every transfer in
    `after` (ids) has completed."""

    id: int
    iteration: int
    warmup: bool
    step: int
    src: int
    dst: int
    src_host: str
    dst_host: str
    chunk: int
    chunks: int
    offset: int
    bytes: int
    qp_index: int
    qp: int
    sport: int
    plane: int
    message: int  # this connection's message number over the run (round-robin counts these)
    part: int  # which of the message's parts (split: 0..qps-1; round-robin: 0)
    after: tuple[int, ...] = ()


@dataclass(frozen=True)
class Schedule:
    """A workload's transfers over a placement, in (iteration, step, src) order; ids are positions."""

    workload: Workload
    placement: Placement
    steps: int  # per iteration
    transfers: tuple[Transfer, ...]
    _by_step: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ranks(self) -> int:
        return self.placement.size

    @property
    def iterations(self) -> int:
        """All iterations, warm-up included."""
        return self.workload.warmup + self.workload.iterations

    @property
    def bus_factor(self) -> float:
        return bus_factor(self.workload.collective, self.ranks)

    def step_transfers(self, iteration: int, step: int) -> tuple[Transfer, ...]:
        lo, hi = self._by_step[iteration, step]
        return self.transfers[lo:hi]

    def measured(self) -> Iterator[Transfer]:
        return (t for t in self.transfers if not t.warmup)

    def bytes_to(self, rank: int) -> int:
        """Bytes rank `rank` receives over the run."""
        return sum(t.bytes for t in self.transfers if t.dst == rank)


def schedule(workload: Workload, placement: Placement) -> Schedule:
    """Every transfer of the run, with its dependencies (module docstring)."""
    n = placement.size
    check(workload.collective, n)
    steps = step_count(workload.collective, n)
    flows_per_step = len(step_flows(workload.collective, n, 0))
    parts = workload.qps if workload.strategy == "split" else 1
    total = (workload.warmup + workload.iterations) * steps * flows_per_step * parts
    if total > MAX_TRANSFERS:
        raise CollectiveError(f"{total:,} transfers is more than the {MAX_TRANSFERS:,} a schedule holds; "
                              "fewer ranks, iterations or QPs (the fabric-scale analysis takes patterns)")
    ranks, planes = placement.ranks, placement.planes
    out: list[Transfer] = []
    by_step: dict[tuple[int, int], tuple[int, int]] = {}
    messages: dict[tuple[int, int], int] = {}
    prev: dict[int, list[int]] = {}  # rank -> ids it sent or received in the step before
    for it in range(workload.warmup + workload.iterations):
        for step in range(steps):
            lo = len(out)
            now: dict[int, list[int]] = {}
            for f in step_flows(workload.collective, n, step):
                offset, nbytes = chunk_span(workload.size, n, f.chunk, f.chunks)
                m = messages.get((f.src, f.dst), 0)
                messages[f.src, f.dst] = m + 1
                after = tuple(sorted(prev.get(f.src, ())))
                if workload.strategy == "split":
                    pieces = [(q, *_part(offset, nbytes, workload.qps, q)) for q in range(workload.qps)]
                else:
                    pieces = [(m % workload.qps, offset, nbytes)]
                for part, (q, off, b) in enumerate(pieces):
                    if b == 0:
                        continue
                    tid = len(out)
                    out.append(Transfer(tid, it, it < workload.warmup, step, f.src, f.dst, ranks[f.src].host,
                                        ranks[f.dst].host, f.chunk, f.chunks, off, b, q, workload.qp_number(q),
                                        workload.udp_sport(q), q % planes, m, part if parts > 1 else 0, after))
                    now.setdefault(f.src, []).append(tid)
                    now.setdefault(f.dst, []).append(tid)
            by_step[it, step] = (lo, len(out))
            prev = {r: now.get(r, []) or prev.get(r, []) for r in range(n)}
    return Schedule(workload, placement, steps, tuple(out), by_step)


def _part(offset: int, nbytes: int, qps: int, q: int) -> tuple[int, int]:
    base, extra = divmod(nbytes, qps)
    start = q * base + min(q, extra)
    return offset + start, base + (1 if q < extra else 0)
