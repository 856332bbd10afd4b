"""Reconciliation: read a switch, diff it against the plan (controller.plan.delta) and write the delta."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from controller.plan.delta import Delta, Update, UpdateType, diff, ordered_updates, sort_key, with_resets
from controller.plan.entries import Entity, TableEntry
from controller.runtime.codec import canonical

if TYPE_CHECKING:
    from controller.runtime.p4rt import SwitchConnection

__all__ = ["Delta", "Update", "UpdateType", "apply", "diff", "ordered_updates", "sort_key", "with_resets"]


def apply(conn: "SwitchConnection", desired: Iterable[Entity], *, dry_run: bool = False,
          resets: Iterable[TableEntry] = (), pi_workarounds: bool | None = None) -> Delta:
    """Make the switch hold exactly `desired` in the tables and profiles of its P4Info; returns the Delta.

    Reads every non-const table, profile members and selector groups, and the default entries the
    plan names or `resets` may restore (with_resets); writes the ordered updates (nothing when the
    switch already matches). `pi_workarounds`: as controller.plan.delta.diff (None: its default).
    """
    p4info = conn.require_p4info()
    want = [canonical(e, p4info) for e in desired]
    tables = {t.name for t in p4info.tables}
    want = with_resets(want, [canonical(r, p4info) for r in resets if r.table in tables])
    defaults = sorted({e.table for e in want if isinstance(e, TableEntry) and e.is_default})
    actual = conn.read_all(default_tables=defaults)
    delta = diff(want, actual, pi_workarounds=pi_workarounds)
    if not dry_run:
        for batch in ordered_updates(delta):
            conn.write(batch)
    return delta
