"""Balance experiment: the same RoCEv2 traffic under each hash mode, uplink load read over P4Runtime.

    result = balance(lab)                       # srv6_spray FLOW, QP, PACKET, PINNED; eecmp FIVE_TUPLE, QP, PIN
    print("\\n".join(result.table()))

Every host sends to every host under another leaf, `qps` QPs per pair, each QP on one plane
(`plane_mode="qp"`), and every QP from one UDP source port (`sport`), as a NIC does that does not
spread QPs over source ports: a FLOW (5-tuple) hash then sees one flow per host pair, the QP hash one
per QP. Per mode the plan is installed with that mode (`Options.mode`, `Pin`s spreading QPs evenly
over the spines, eecmp `HostPin`s spreading destination hosts), the traffic runs, and the packets
each source leaf put on each uplink are read from the counters: srv6_spray's `path_packets` (index
= spine) and eecmp's `member_packets` (index = uplink). The figure of merit is max/mean over all
uplinks of the leaves: 1.0 is perfect balance. The lab's program and plan are put back afterwards.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from controller.routes import SPRAY, Options
from controller.plan.p4names import EECMP, FLOW, PACKET, PIN, QP
from controller.plan.options import HostPin
from mininet_labs.lab import Lab, LabError
from mininet_labs.scenarios import MEMBER_PACKETS, PATH_PACKETS, even_pins

# (program, label, hash mode, pinned)
MODES: tuple[tuple[str, str, int, bool], ...] = (
    (SPRAY, "FLOW", FLOW, False), (SPRAY, "QP", QP, False), (SPRAY, "PACKET", PACKET, False),
    (SPRAY, "PINNED", QP, True),
    (EECMP, "FIVE_TUPLE", FLOW, False), (EECMP, "QP", QP, False), (EECMP, "PIN", PIN, True),
)


@dataclass
class ModeResult:
    """Packets per uplink ('leaf->spine') of one mode, and what the traffic lost."""

    program: str
    mode: str
    uplinks: dict[str, int]
    sent: int
    lost: int
    seconds: float

    @property
    def max(self) -> int:
        return max(self.uplinks.values(), default=0)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.uplinks.values()) if self.uplinks else 0.0

    @property
    def max_over_mean(self) -> float | None:
        return round(self.max / self.mean, 3) if self.mean else None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "max": self.max, "mean": round(self.mean, 2), "max_over_mean": self.max_over_mean}


@dataclass
class BalanceResult:
    qps: int
    messages: int
    sport: int
    rate: float
    pairs: list[tuple[str, str]]
    modes: list[ModeResult]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"qps_per_pair": self.qps, "messages_per_pair": self.messages, "sport": self.sport,
                "rate_pps_per_sender": self.rate, "pairs": [list(p) for p in self.pairs],
                "modes": [m.to_json() for m in self.modes], "notes": self.notes}

    def table(self) -> list[str]:
        out = [f"balance: {len(self.pairs)} host pairs x {self.qps} QPs, {self.messages} one-packet messages per "
               f"pair, one UDP source port ({self.sport}); uplink packets of every source leaf",
               f"  {'program':<14} {'mode':<11} {'max':>6} {'mean':>8} {'max/mean':>9} {'lost':>5}"]
        for m in self.modes:
            out.append(f"  {m.program:<14} {m.mode:<11} {m.max:>6} {m.mean:>8.1f} {m.max_over_mean or 0:>9.3f} "
                       f"{m.lost:>5}")
        out += [f"  note: {n}" for n in self.notes]
        return out


def cross_leaf_pairs(lab: Lab) -> list[tuple[str, str]]:
    """Every ordered pair of hosts under different leaves (in plane 0; the default lab's leaves line up)."""
    leaf = {h: lab.host(h).nic(0).leaf for h in lab.hosts}
    return [(a, b) for a in lab.hosts for b in lab.hosts if leaf[a] != leaf[b]]


def host_pins(lab: Lab) -> tuple[HostPin, ...]:
    """eecmp PIN: destination host k of a leaf gets host index k, so a leaf's hosts spread over the uplinks."""
    out = []
    for p in range(lab.model.planes):
        for leaf in lab.model.t0s(p):
            for slot in range(len(leaf.host_ports)):
                out.append(HostPin(p, leaf.index, slot, slot))
    return tuple(out)


def uplink_loads(lab: Lab) -> dict[str, int]:
    """Packets each leaf sent on each uplink so far: path_packets (srv6_spray) or member_packets (eecmp)."""
    counter = MEMBER_PACKETS if lab.program == EECMP else PATH_PACKETS
    leaves = {s.name: s for s in lab.model.switches if s.role == "t0"}
    spines = {p: lab.model.t1s(p) for p in range(lab.model.planes)}

    def one(conn: Any) -> dict[str, int]:
        leaf = leaves[conn.name]
        cells = conn.read_counter(counter)
        return {f"{leaf.name}->{spines[leaf.plane][j].name}": cells[j].packets for j in range(len(leaf.uplinks))}

    with lab.client() as client:
        result = client.run(one, sorted(leaves))
    if not result.ok:
        raise LabError(f"reading counters failed: {result.summary()}")
    return {k: v for r in result.results.values() for k, v in r.items()}


def _install(lab: Lab, program: str, options: Options | None) -> None:
    push = "force" if lab.program != program else "missing"
    lab.program, lab.options = program, options
    bad = [o for o in lab.install(push=push).values() if not o.ok]  # type: ignore[arg-type]
    if bad:
        raise LabError(f"installing {program} failed: {bad[0].error}")


def balance(lab: Lab, *, qps: int = 8, messages: int = 64, sport: int = 49152, rate: float = 500.0,
            modes: Sequence[tuple[str, str, int, bool]] = MODES, pairs: Sequence[tuple[str, str]] | None = None
            ) -> BalanceResult:
    """Run the traffic once per mode and read the uplink loads (see the module doc)."""
    if lab.failures():
        raise LabError("the lab has recorded failures ('fabricctl restore all' first): balance needs every uplink")
    pairs = list(pairs) if pairs is not None else cross_leaf_pairs(lab)
    if not pairs:
        raise LabError("balance needs hosts under at least two leaves")
    messages = max(qps, messages // qps * qps)  # the same packets on every QP
    program, options = lab.program, lab.options
    results = []
    try:
        for prog, label, mode, pinned in modes:
            if prog == SPRAY:
                opts = Options(mode=mode, pins=even_pins(lab, pairs, qps) if pinned else ())
            else:
                opts = Options(mode=mode if mode != PIN else FLOW, host_pins=host_pins(lab) if pinned else ())
            _install(lab, prog, opts)
            before = uplink_loads(lab)
            report = lab.traffic(pairs, qps=qps, messages=messages, plane_mode="qp", sport=sport, rate=rate)
            after = uplink_loads(lab)
            t = report.totals()
            results.append(ModeResult(prog, label, {k: after[k] - before[k] for k in after}, t["sent"], t["lost"],
                                      report.seconds))
    finally:
        _install(lab, program, options)
    res = BalanceResult(qps, messages, sport, rate, pairs, results)
    res.notes = explain(res)
    return res


def explain(result: BalanceResult) -> list[str]:
    """Where a figure departs from what the modes promise (PACKET ~1, pins 1, QP better than FLOW), why."""
    by = {(m.program, m.mode): m.max_over_mean for m in result.modes}
    notes = []
    flows = len(result.pairs)
    for prog, flow, qp in ((SPRAY, "FLOW", "QP"), (EECMP, "FIVE_TUPLE", "QP")):
        f, q = by.get((prog, flow)), by.get((prog, qp))
        if f is not None and q is not None and q > f:
            notes.append(f"{prog}: QP ({q}) came out worse than {flow} ({f}): with {flows} host pairs the 5-tuple "
                         "hash has few flows to place and can land evenly by chance; the QP hash places "
                         f"{flows * result.qps} QP flows and is the fairer bet, not a sure one, on so few uplinks")
    p = by.get((SPRAY, "PACKET"))
    if p is not None and p > 1.1:
        notes.append(f"srv6_spray PACKET: {p}: per-packet hashing over only {result.messages} packets per pair "
                     "leaves a statistical imbalance of a few percent; more messages shrink it")
    for prog, pin in ((SPRAY, "PINNED"), (EECMP, "PIN")):
        v = by.get((prog, pin))
        if v is not None and v != 1.0:
            notes.append(f"{prog} {pin}: {v}, not 1.0: the pins spread QPs (or destination hosts) evenly only when "
                         "their count is a multiple of the spines per plane")
    if any(m.lost for m in result.modes):
        notes.append("some modes lost packets: the lab was overloaded (lower --rate); loads then undercount")
    return notes
