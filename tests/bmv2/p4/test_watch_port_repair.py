"""A group whose members all watch one of the planned ports, on a real simple_switch_grpc whose PI reads back
each member's own watch port (patches/pi-watch-port.patch): a reconcile sees the difference and repairs it."""

from __future__ import annotations

from controller.plan.entries import ActionProfileGroup
from controller.runtime.codec import canonical
from controller.runtime.reconcile import apply
from tests.bmv2.p4.test_eecmp import PROFILE as ECMP_PROFILE, QP, UPLINKS, ecmp_entries, v4
from tests.bmv2.p4.test_watch_port import watched


def test_members_all_watching_one_planned_port_are_repaired_by_a_reconcile(ecmp):
    plain = ecmp_entries(v4("10.1.0.0", 16), mode=QP)
    planned = watched(plain, dict(enumerate(UPLINKS, 1)))
    wrong = watched(plain, {m: UPLINKS[-1] for m in range(1, len(UPLINKS) + 1)})  # every member on the last uplink
    ecmp.install(*wrong)
    p4info = ecmp.conn.require_p4info()
    (want,) = [canonical(e, p4info) for e in planned if isinstance(e, ActionProfileGroup)]
    (read,) = ecmp.conn.read_groups(ECMP_PROFILE)
    assert read.watch_ports == tuple((m, UPLINKS[-1]) for m in want.members)  # read back as written

    delta = apply(ecmp.conn, planned, pi_workarounds=False)
    assert delta.modifies == (want,) and not delta.inserts and not delta.deletes
    assert not delta.unwatch and not delta.rewatch
    assert ecmp.conn.read_groups(ECMP_PROFILE) == [want]  # each member watching its own uplink
    assert not apply(ecmp.conn, planned, pi_workarounds=False)
