"""One-shot fail/restore through the running controller: recorded by the command, applied by `fabricctl run`,
the command waiting (bounded) for the controller's word in its status file."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.model.failures import Failure, failure_to_json
from controller.files.safefile import pid_alive
from controller.service.status import read_status

POLL = 0.02  # seconds between reads of the status file


@dataclass(frozen=True)
class Controller:
    """The controller running on a state file, as its status file names it."""

    pid: int
    election_id: int

    @classmethod
    def of(cls, view: dict[str, Any]) -> Controller:
        return cls(int(view["pid"]), int(view.get("election_id") or 0))

    def __str__(self) -> str:
        return f"pid {self.pid}, election id {self.election_id}"


def running(state: Path) -> Controller | None:
    """The controller that runs on `state` and is primary on at least one switch (None: no such one;
    the one-shot command then writes the switches itself)."""
    return primary_in(read_status(state))


def primary_in(view: dict[str, Any] | None) -> Controller | None:
    """The controller a published view names, if it is primary on at least one switch."""
    if view is None or not isinstance(view.get("sessions"), dict):
        return None
    if not any(isinstance(s, dict) and s.get("role") == "primary" for s in view["sessions"].values()):
        return None
    try:
        return Controller.of(view)
    except (KeyError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Outcome:
    """How a hand-off ended: applied (ok), or why not (`error`, one line), after `seconds`."""

    ok: bool
    seconds: float
    error: str = ""
    pending: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "ms": round(self.seconds * 1000, 1), "error": self.error or None,
                "pending": list(self.pending)}


@dataclass
class Handoff:
    """A change the command recorded (under the state lock, at monotonic `saved_ns`) for `controller` to
    apply: `added` must be in the failure set the controller's switches hold, `removed` must not."""

    state: Path | None
    controller: Controller
    saved_ns: int
    added: frozenset[Failure] = field(default_factory=frozenset)
    removed: frozenset[Failure] = field(default_factory=frozenset)
    describe: Callable[[Failure], str] = str
    read: Callable[[], dict[str, Any] | None] | None = None  # the store's view (etcd); None: the status file
    saved_rev: int = 0  # the store's revision of the save (etcd: compared with the view's read_revision)

    def verdict(self, view: dict[str, Any]) -> Outcome | None:
        """The outcome a status view decides (None: not yet). The view counts only once the controller
        read the record after this command saved it (its `read_mono_ns`, the same clock)."""
        if view.get("pid") != self.controller.pid:
            return None
        if self.read is not None:  # another machine's clock: the store's revisions order the read after the save
            if int(view.get("read_revision") or 0) < self.saved_rev:
                return None
        elif int(view.get("read_mono_ns") or 0) <= self.saved_ns:
            return None
        held = _keys(view.get("applied") or [])
        recorded = {_key(item): item.get("by") for item in view.get("recorded") or [] if isinstance(item, dict)}
        kept = [f for f in self.removed if recorded.get(_key(failure_to_json(f))) == "detector"]
        if kept:
            names = ", ".join(self.describe(f) for f in sorted(kept, key=str))
            return Outcome(False, 0.0, f"the running controller ({self.controller}) keeps {names} failed: its probes "
                                       "still fail, so its detector recorded it again ('fabricctl status' shows them)")
        if any(_key(failure_to_json(f)) not in held for f in self.added):
            return None
        if any(_key(failure_to_json(f)) in held for f in self.removed):
            return None
        pending = tuple(view.get("pending") or ())
        return Outcome(True, 0.0, pending=pending) if not pending else None

    def wait(self, timeout: float, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> Outcome:
        """Poll the status file until the controller applied the change, died, or `timeout` passed."""
        t0 = clock()
        last: dict[str, Any] = {}
        while True:
            view = self.read() if self.read is not None else read_status(self.state)  # type: ignore[arg-type]
            if view is not None:
                last = view
                out = self.verdict(view)
                if out is not None:
                    return Outcome(out.ok, clock() - t0, out.error, out.pending)
            elif self.read is not None:  # etcd: the leader's lease took its view with it
                return Outcome(False, clock() - t0, f"the leader ({self.controller}) went before it applied the "
                                                     "change (its lease expired); it is recorded: the next leader "
                                                     "applies it")
            elif not pid_alive(self.controller.pid):
                return Outcome(False, clock() - t0, f"the running controller ({self.controller}) exited before it "
                                                     "applied the change; it is recorded: 'fabricctl install' applies it")
            if clock() - t0 >= timeout:
                pending = tuple(last.get("pending") or ())
                why = (f"; switches {', '.join(pending)} wait for their session to come back" if pending else "")
                return Outcome(False, clock() - t0, f"the running controller ({self.controller}) did not report applying "
                                                     f"the change within {timeout:g} s{why}; it is recorded, and the "
                                                     "controller applies it when it can ('fabricctl events')", pending)
            sleep(POLL)


def _key(item: dict[str, Any]) -> tuple[Any, ...]:
    """A failure's JSON without its origin, hashable."""
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in item.items() if k != "by"))


def _keys(items: Iterable[Any]) -> set[tuple[Any, ...]]:
    return {_key(i) for i in items if isinstance(i, dict)}


def report(h: Handoff, doc: dict[str, Any], timeout: float, as_json: bool) -> None:
    """Wait for the controller (outside the state lock), then print the command's last line (or its
    JSON document); OpError, exit 1, if the controller did not apply the change in time."""
    import click

    from controller.exitcodes import SWITCH_ERROR, OpError

    out = h.wait(timeout)
    via = {"pid": h.controller.pid, "election_id": h.controller.election_id, **out.to_json()}
    if as_json:
        click.echo(json.dumps({**doc, "applied": out.ok, "via_controller": via}, indent=2))
    elif out.ok:
        click.echo(f"applied by the running controller ({h.controller}) in {out.seconds:.2f} s")
    if not out.ok:
        raise OpError(out.error, SWITCH_ERROR)
