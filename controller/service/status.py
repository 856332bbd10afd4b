"""The running controller's view, written atomically beside the state file for `fabricctl status`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from controller.files.atomic import write_atomic
from controller.files.safefile import pid_alive
from controller.service.denylistpush import lines as denylist_lines

STATUS_NAME = ".fabric-service.json"


def status_path(state: Path) -> Path:
    """Where a controller running on this state file publishes its view."""
    return state.with_name(STATUS_NAME)


def write_status(path: Path, doc: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(doc, indent=1, default=str) + "\n")


def _doc(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def may_write(path: Path, pid: int, primary_somewhere: bool) -> bool:
    """Whether controller `pid` publishes its view: always where it is primary on some switch; a hot
    backup only while no other live controller primary somewhere publishes there (two `run` on one
    state file share the file, and `fabricctl status` and the one-shot commands want the primary's)."""
    if primary_somewhere:
        return True
    doc = _doc(path)
    if doc is None or doc.get("pid") == pid or not isinstance(doc.get("pid"), int) or not pid_alive(doc["pid"]):
        return True
    return not any(s.get("role") == "primary" for s in doc.get("sessions", {}).values() if isinstance(s, dict))


def remove_status(path: Path, pid: int) -> None:
    """Remove the status file at exit if it is this controller's (a backup leaves the primary's alone)."""
    doc = _doc(path)
    if doc is not None and doc.get("pid") != pid:
        return
    try:
        path.unlink()
    except OSError:
        pass


def read_status(state: Path) -> dict[str, Any] | None:
    """The view of the controller running on `state`, or None when none runs (no file, dead pid, unreadable)."""
    doc = _doc(status_path(state))
    if doc is None:
        return None
    pid = doc.get("pid")
    if not isinstance(pid, int) or not pid_alive(pid):
        return None
    return doc


def lines(view: dict[str, Any] | None) -> list[str]:
    """The running controller's view for `fabricctl status`: its role, then each link's health and last probe."""
    if view is None:
        return []
    roles = [s["role"] for s in view.get("sessions", {}).values()]
    out = [f"controller: pid {view['pid']}, election id {view.get('election_id')}, "
           f"{roles.count('primary')} primary / {roles.count('backup')} backup / {roles.count('down')} down"]
    leader = view.get("leader")
    if isinstance(leader, dict):  # etcd leadership (controller.state.leader)
        out[0] = (f"controller: leader {leader.get('host')} pid {view['pid']}, election id {leader.get('election_id')} "
                  f"(lease TTL {leader.get('ttl')} s), " + out[0].split(", ", 2)[-1])
    if view.get("held"):
        out.append(f"  writes held: {view['held']}")
    for name, sess in sorted(view.get("sessions", {}).items()):
        if isinstance(sess, dict) and sess.get("answers") is False:  # the liveness rule recorded it failed (hung)
            out.append(f"  switch {name}: NOT ANSWERING ({sess.get('late_calls', 0)} calls past their deadline)")
    for name, link in sorted(view.get("links", {}).items()):
        dirs = link.get("directions", {}).values()
        lost = sum(d["lost"] for d in dirs)
        sent = sum(d["sent"] for d in dirs)
        delays = [d["last_delay_ms"] for d in dirs if d.get("last_delay_ms") is not None]
        last = max((d["last_probe"] or 0 for d in dirs), default=0)
        ago = f"{max(0.0, view.get('updated', last) - last):.1f}s ago" if last else "never"
        why = "; ".join(d["reason"] for d in dirs if not d["up"] and d.get("reason"))
        out.append(f"  link {name}: {'up' if link['up'] else 'DOWN'}, probes {sent - lost}/{sent} back, "
                   f"last {ago}" + (f", delay {max(delays):.2f} ms" if delays else "") + (f" ({why})" if why else ""))
    return out + denylist_lines(view.get("denylist"))
