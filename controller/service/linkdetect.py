"""What the kernel data plane's link probes say, decided without sockets or clocks: each direction of each T0-T1 link
sends a numbered probe per period; each probe is judged, in sequence order, arrived or lost (its deadline passed
while a probe sent after it arrived somewhere: the controller or the machine stalling loses none), and fed to that
direction's detector (controller.service.detect: K lost -> down, gray ratio, M back -> up, flap damping). A link is
down while either direction's detector holds it down; a switch all of whose links are down while each neighbour has
a link up is down itself (SwitchDown). A direction's losses count once one of its probes has arrived
(or ARM_GRACE_NS after its first): a new lab's link-local addresses are tentative (DAD) for a second or two, and a
probe to a tentative address is dropped by the far kernel.

    judge = LinkJudge(probe_paths(topo), Thresholds(), timeout_ns=80_000_000)
    seq = judge.sent(path, now_ns)            # the number the probe carries
    judge.arrived(link_id, direction, seq)    # read at the far switch
    for state, change in judge.judge(now_ns): ...
    judge.failures()                          # {LinkDown: "3 consecutive probes lost (p0-t0-0:3 -> p0-t1-1:1)"}
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from controller.failover import Failure, LinkDown, SwitchDown
from controller.model.topology import Topology
from controller.service.detect import Change, Detector, Thresholds, force_down, step
from controller.southbound.kroutes import link_local

HARD_TIMEOUT_NS = 1_000_000_000  # a probe this old is lost even if nothing sent after it arrived anywhere
ARM_GRACE_NS = 10_000_000_000  # a direction's losses count from its first probe arrived, or this long after its first


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    """How the kernel `run` probes: the period per link direction, a probe's deadline, the detector's thresholds."""

    period: float = 0.05
    timeout: float = 0.08
    thresholds: Thresholds = field(default_factory=Thresholds)


@dataclass(frozen=True, slots=True)
class ProbePath:
    """One direction of a T0-T1 link: out of `src` port `src_port` to the far port's link-local `dst_addr`."""

    link: LinkDown
    link_id: int
    direction: int  # 0: T0 -> T1, 1: T1 -> T0
    src: str
    src_port: int
    dst: str
    dst_port: int
    dst_addr: str

    @property
    def label(self) -> str:
        return f"{self.src}:{self.src_port} -> {self.dst}:{self.dst_port}"


def probe_paths(topo: Topology) -> list[ProbePath]:
    """Both directions of every T0-T1 link (a T0's uplinks[j] faces T1 j; a T1's downlinks[i] faces T0 i)."""
    out: list[ProbePath] = []
    for p in range(topo.planes):
        for leaf in topo.t0s(p):
            for j, spine in enumerate(topo.t1s(p)):
                link, n = LinkDown(leaf.name, spine.name), len(out) // 2
                up, down = leaf.uplinks[j], spine.downlinks[leaf.index]
                out.append(ProbePath(link, n, 0, leaf.name, up, spine.name, down, link_local(spine.mac)))
                out.append(ProbePath(link, n, 1, spine.name, down, leaf.name, up, link_local(leaf.mac)))
    return out


@dataclass
class PathState:
    """A direction's detector and its probes in flight."""

    path: ProbePath
    detector: Detector = field(default_factory=Detector)
    seq: int = 0
    outstanding: dict[int, int] = field(default_factory=dict)  # seq -> sent ns, in sending order
    arrived: set[int] = field(default_factory=set)
    sent: int = 0
    lost: int = 0
    late: int = 0  # arrived after it was judged lost
    unsent: int = 0  # could not be sent (a socket error): not judged
    armed: bool = False  # a probe arrived (or the grace passed): losses count from then
    first_sent_ns: int | None = None
    unarmed: int = 0  # lost before the direction was armed: not judged


class LinkJudge:
    """Every probe direction's detector, fed in sequence order."""

    def __init__(self, paths: Iterable[ProbePath], thresholds: Thresholds, timeout_ns: int,
                 hard_timeout_ns: int = HARD_TIMEOUT_NS, arm_grace_ns: int = ARM_GRACE_NS) -> None:
        self.t = thresholds
        self.arm_grace_ns = arm_grace_ns
        self.timeout_ns = timeout_ns
        self.hard_timeout_ns = max(hard_timeout_ns, timeout_ns)
        self.states = [PathState(p) for p in paths]
        self._by_key = {(s.path.link_id, s.path.direction): s for s in self.states}
        self._links_of: dict[str, set[LinkDown]] = {}  # switch -> its probed links
        for st in self.states:
            for name in (st.path.src, st.path.dst):
                self._links_of.setdefault(name, set()).add(st.path.link)
        self.progress_ns = 0  # the latest send time of any probe that arrived
        self.strays = 0  # probes for no direction of ours, or a number never sent

    def state(self, link_id: int, direction: int) -> PathState | None:
        return self._by_key.get((link_id, direction))

    def sent(self, s: PathState, now_ns: int) -> int:
        """A probe leaves on `s` now: its sequence number (`unsent` takes it back if the socket refuses it)."""
        s.seq += 1
        s.outstanding[s.seq] = now_ns
        if s.first_sent_ns is None:
            s.first_sent_ns = now_ns
        s.sent += 1
        return s.seq

    def unsent(self, s: PathState, seq: int) -> None:
        """The probe numbered `seq` could not leave (its port down, its address not yet usable): it is not judged,
        as the P4 prober counts no probe its packet-out refused; carrier speaks for a port that cannot send."""
        if s.outstanding.pop(seq, None) is not None:
            s.sent -= 1
            s.unsent += 1
            if s.sent == 0:
                s.first_sent_ns = None

    def arrived(self, link_id: int, direction: int, seq: int) -> bool:
        """A probe read at its far switch; False when it is not one in flight (late, or not ours)."""
        s = self._by_key.get((link_id, direction))
        if s is None or seq not in s.outstanding:
            if s is not None and 0 < seq <= s.seq:
                s.late += 1
            else:
                self.strays += 1
            return False
        s.arrived.add(seq)
        self.progress_ns = max(self.progress_ns, s.outstanding[seq])
        return True

    def _due(self, sent_ns: int, now_ns: int) -> bool:
        age = now_ns - sent_ns
        return age >= self.hard_timeout_ns or (age >= self.timeout_ns and self.progress_ns > sent_ns)

    def judge(self, now_ns: int) -> list[tuple[PathState, Change]]:
        """Feed every probe that can be judged now, oldest first per direction; the detectors' changes."""
        out: list[tuple[PathState, Change]] = []
        for s in self.states:
            for seq, sent_ns in list(s.outstanding.items()):
                ok = seq in s.arrived
                if not ok and not self._due(sent_ns, now_ns):
                    break  # later ones wait for it: outcomes go in order
                del s.outstanding[seq]
                s.arrived.discard(seq)
                if not s.armed:  # a far address still tentative (DAD) loses the first probes of a new lab
                    first = sent_ns if s.first_sent_ns is None else s.first_sent_ns
                    if not ok and sent_ns - first < self.arm_grace_ns:
                        s.unarmed += 1
                        continue
                    s.armed = True
                if not ok:
                    s.lost += 1
                s.detector, change = step(s.detector, ok, self.t)
                if change is not None:
                    out.append((s, change))
        return out

    def force_down(self, links: Iterable[Failure], reason: str) -> list[tuple[PathState, Change]]:
        """Another signal (a port's carrier) says these links are dead: their directions go down now; the probes
        restore them (M in a row)."""
        dead = set(links)
        out = []
        for s in self.states:
            if s.path.link in dead and s.detector.up:
                s.detector = force_down(s.detector, self.t, reason)
                out.append((s, Change.DOWN))
        return out

    def seed_down(self, links: Iterable[Failure], reason: str = "recorded failed when the controller started") -> None:
        """Start these links' directions down (the detector's failures in the record; a SwitchDown: every link of the
        switch): restored by M probes back."""
        dead = set(links)
        dead |= {ln for f in list(dead) if isinstance(f, SwitchDown) for ln in self._links_of.get(f.name, ())}
        for s in self.states:
            if s.path.link in dead:
                s.detector = Detector(up=False, reason=reason)

    def links_down(self) -> dict[LinkDown, str]:
        """Each link a direction's detector holds down, with the first such direction's evidence."""
        out: dict[LinkDown, str] = {}
        for s in self.states:
            if not s.detector.up and s.path.link not in out:
                out[s.path.link] = f"{s.detector.reason} ({s.path.label})"
        return out

    def switches_down(self, links: set[LinkDown] | None = None) -> set[str]:
        """The switches every link of which is down while each of their neighbours has a link up (the switch, not
        its neighbours, is what fails: as the P4 liveness rule, a silent switch among answering ones)."""
        down = set(self.links_down()) if links is None else links
        alive = {n for n, ls in self._links_of.items() if ls - down}
        return {n for n, ls in self._links_of.items() if n not in alive
                and all((ln.t1 if ln.t0 == n else ln.t0) in alive for ln in ls)}

    def failures(self) -> dict[Failure, str]:
        """What the probes hold down, with the evidence: a switch all of whose links are down (SwitchDown: its
        links are not listed), and every other link down."""
        links = self.links_down()
        switches = self.switches_down(set(links))
        out: dict[Failure, str] = {SwitchDown(n): f"every probe through it lost ({len(self._links_of[n])} links)"
                                   for n in sorted(switches)}
        out |= {ln: why for ln, why in links.items() if ln.t0 not in switches and ln.t1 not in switches}
        return out

    def restored(self) -> dict[Failure, str]:
        """Each link whose directions are all up, with the evidence of the last one to come back (and each switch
        with a link up: "its probes back")."""
        down = {s.path.link for s in self.states if not s.detector.up}
        best: dict[Failure, tuple[int, str]] = {}
        for s in self.states:
            if s.path.link in down or not s.detector.reason:
                continue
            prev = best.get(s.path.link)
            if prev is None or s.detector.since_change < prev[0]:
                best[s.path.link] = (s.detector.since_change, s.detector.reason)
        out: dict[Failure, str] = {link: reason for link, (_, reason) in best.items()}
        switches = self.switches_down()
        out |= {SwitchDown(n): "its probes back" for n in self._links_of if n not in switches}
        return out
