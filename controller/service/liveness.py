"""Whether a switch still answers: a cheap call to each switch every period (the liveness check), and
the pure rule that records a switch failed when it stops answering while the rest of the fabric does."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from controller.periodic import Periodic
from controller.service.detect import Change
from controller.service.switchcalls import SwitchCalls, SwitchSilent


@dataclass(frozen=True, slots=True)
class SwitchHealth:
    """One switch as the detector sees it: up, or recorded failed since `since_ns` (monotonic)."""

    up: bool = True
    since_ns: int = 0
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Signals:
    """What the controller knows of one switch at one moment (monotonic ns; 0: never)."""

    silent_since: int | None  # first call it left unanswered past its deadline, since its last answer
    answered_ns: int  # when it last answered a call in time
    others_answered_sent_ns: int  # latest send time of a call any OTHER switch answered in time
    probes_ns: int  # latest send time of a probe it carried (sent from it or received at it) that arrived
    fabric_probes_ns: int  # latest send time of any probe that arrived anywhere


def judge(h: SwitchHealth, s: Signals, now_ns: int) -> tuple[SwitchHealth, Change | None]:
    """Down: the switch left a call unanswered past its deadline, and since that call was sent another
    switch answered a later call and probes elsewhere arrived (so the controller is not the one that
    stalled) while no probe through this switch did. Up: it answers again and a probe sent through
    it after it was recorded failed arrived."""
    if h.up:
        if s.silent_since is None:
            return h, None
        if s.others_answered_sent_ns > s.silent_since and s.fabric_probes_ns > s.silent_since \
                and s.probes_ns < s.silent_since:
            silent_ms = (now_ns - s.silent_since) / 1e6
            return replace(h, up=False, since_ns=now_ns,
                           reason=f"no answer for {silent_ms:.0f} ms and no probe through it since, while the "
                                  "other switches answered"), Change.DOWN
        return h, None
    if s.silent_since is None and s.answered_ns > h.since_ns and s.probes_ns > h.since_ns:
        return replace(h, up=True, since_ns=now_ns, reason="it answers again and its probes arrive"), Change.UP
    return h, None


class Pinger:
    """Every `every` seconds, the liveness call (`ping`: P4Runtime Capabilities, a netlink read) to each switch `ready` says is in session, unless
    a call to it is still running: the answers (or their absence) feed SwitchCalls' silence. The
    calls run on the switches' workers, so one that never answers holds nothing here."""

    def __init__(self, calls: SwitchCalls, sessions: Mapping[str, object], ready: Callable[[str], bool],
                 every: float = 0.1) -> None:
        self.calls, self.sessions, self.ready, self.every = calls, sessions, ready, every
        self.sent = 0
        self._loop = Periodic("liveness", self.ping_all, lambda: self.every)

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def ping_all(self) -> None:
        for name, session in self.sessions.items():
            if not self.ready(name) or not self.calls.idle(name):
                continue
            try:
                self.calls.submit(name, session.ping, probe=True)  # type: ignore[attr-defined]
                self.sent += 1
            except SwitchSilent:
                continue
