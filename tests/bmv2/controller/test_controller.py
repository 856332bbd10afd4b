"""The control plane against real simple_switch_grpc switches: install, failover and restore,
a controller killed mid-install, arbitration between two controllers, and fabricctl end to end.

Every check reads the switches back in full and compares them with the plan (or with the state
before plus failover.delta), entity by entity: nothing missing, nothing extra, nothing differing.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from ipaddress import IPv6Address

import grpc
import pytest

from controller import exitcodes, failover, failurerecord, planning
from controller.southbound import p4runtime
from controller.southbound.base import Outcome
from controller.model import topology
from controller.runtime.codec import canonical, encode_entity
from controller.southbound.p4runtime import show_entity
from controller.plan.entries import ActionProfileGroup, ActionProfileMember, Entity, Lpm, TableEntry
from controller.runtime.proto import p4runtime_pb2, p4runtime_pb2_grpc
from controller.model.failures import LinkDown
from controller.runtime.p4rt import NotPrimaryError, WriteError
from controller.plan.delta import Delta, diff
from controller.routes import ROUTES_V6, SPRAY_SELECTOR, VIA_SPINE
from controller.plan.p4names import SPRAY_PATHS
from controller.programs.toolchain import REPO_ROOT
from tests.bmv2.conftest import require_bmv2
from tests.bmv2.fabric_fixture import GATE_LINE, FabricLab, applied, differences, start_lab

LEAF, OTHER_LEAF, SPINE, OTHER_SPINE = "p0-t0-0", "p0-t0-1", "p0-t1-1", "p0-t1-0"
FAILED = LinkDown(LEAF, SPINE)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FabricLab]:
    """2 planes x 2 T1 x 2 T0 x 2 hosts: eight switches, started once for the module."""
    require_bmv2()
    yield from start_lab(tmp_path_factory.mktemp("fabric"), topology.build(2, 2, 2, 2, name="ctl_lab"))


def install(lab: FabricLab, election_id: int = 1) -> dict[str, Outcome]:
    """What `fabricctl install` does: encode the plan under the recorded failures, then sync
    every switch (push the pipeline where there is none, reconcile to the plan)."""
    encoded = lab.encoded(failurerecord.load_failures(lab.topo, lab.state_path))
    return p4runtime.sync(lab.topo, encoded, lab.artifacts, lab.p4info, election_id=election_id, timeout=10,
                    dry_run=False, push="missing")


def installed(lab: FabricLab) -> dict[str, list[Entity]]:
    """Install the healthy plan from whatever the switches hold; their read-back, checked exact."""
    lab.state_path.unlink(missing_ok=True)
    outcomes = install(lab)
    assert [o.error for o in outcomes.values() if not o.ok] == []
    held = lab.snapshot()
    assert differences(held, lab.desired()) == []
    return held


def canonical_delta(lab: FabricLab, d: Delta) -> Delta:
    return Delta(*(tuple(canonical(e, lab.p4info) for e in xs) for xs in (d.inserts, d.modifies, d.deletes)))


def planned_delta(lab: FabricLab, old: frozenset, new: frozenset) -> dict[str, Delta]:
    """failover.delta between two failure sets, per switch, in read-back form."""
    program = lab.artifacts.program  # a checked program name
    moved = failover.delta(planning.fabric(lab.topo, program, old),  # type: ignore[arg-type]
                           planning.fabric(lab.topo, program, new))  # type: ignore[arg-type]
    return {n: canonical_delta(lab, d) for n, d in moved.items()}


def ok_json(result) -> dict:  # type: ignore[no-untyped-def]
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.stderr}{result.stdout}"
    return json.loads(result.stdout)


# --- 1. install ------------------------------------------------------------------------------

def test_install_makes_every_switch_hold_exactly_its_plan(lab: FabricLab) -> None:
    lab.state_path.unlink(missing_ok=True)
    had_pipeline = lab.pipelines()
    before = {n: lab.read(n) if had_pipeline[n] else [] for n in lab.names}
    want = lab.desired()

    outcomes = install(lab)

    assert {n: o.error for n, o in outcomes.items()} == {n: None for n in lab.names}
    assert {n: o.pipeline for n, o in outcomes.items()} == {
        n: "kept" if had_pipeline[n] else "pushed" for n in lab.names}
    assert {n: o.delta for n, o in outcomes.items()} == {n: diff(want[n], before[n]) for n in lab.names}
    assert differences(lab.snapshot(), want) == []
    # the plan has every kind of entity, on every switch
    kinds = {n: {type(e) for e in want[n]} for n in lab.names}
    assert kinds[LEAF] == {ActionProfileMember, ActionProfileGroup, TableEntry}
    assert kinds[SPINE] == {TableEntry}

    again = install(lab)  # idempotent: nothing to write, the pipeline kept
    assert {n: (o.pipeline, bool(o.delta)) for n, o in again.items()} == {n: ("kept", False) for n in lab.names}


def test_install_removes_extra_and_fixes_differing_entities(lab: FabricLab) -> None:
    installed(lab)
    want = lab.desired()
    route = next(e for e in want[OTHER_SPINE] if isinstance(e, TableEntry) and e.params)
    wrong = wrong_port(route)
    extra = stale_route("2001:db8:dead::1", 128, port=1)
    member = ActionProfileMember(SPRAY_SELECTOR, 99, VIA_SPINE, (("spine_usid", 0x7777), ("path_index", 99)))
    writer = lab.connection(OTHER_SPINE, election_id=5)
    try:
        writer.write([("MODIFY", wrong), ("INSERT", extra)])
    finally:
        writer.close()
    writer = lab.connection(LEAF, election_id=5)
    try:
        writer.write([("INSERT", member)])
    finally:
        writer.close()
    assert sorted(differences(lab.snapshot(), want)) == sorted([
        f"{OTHER_SPINE}: extra {show_entity(wrong)}", f"{OTHER_SPINE}: missing {show_entity(route)}",
        f"{OTHER_SPINE}: extra {show_entity(extra)}", f"{LEAF}: extra {show_entity(member)}"])

    outcomes = install(lab)

    assert outcomes[OTHER_SPINE].delta == Delta(modifies=(route,), deletes=(extra,))
    assert outcomes[LEAF].delta == Delta(deletes=(member,))
    assert all(not o.delta for n, o in outcomes.items() if n not in (OTHER_SPINE, LEAF))
    assert differences(lab.snapshot(), want) == []


def wrong_port(entry: TableEntry) -> TableEntry:
    """The entry with its port parameter pointing elsewhere."""
    params = tuple((n, v + 100 if n == "port" else v) for n, v in entry.params)  # type: ignore[operator]
    return dataclasses.replace(entry, params=params)


def stale_route(prefix: str, length: int, port: int) -> TableEntry:
    """A routes_v6 entry no plan has (canonical form: full names, ints)."""
    return TableEntry(ROUTES_V6, (("dst_addr", Lpm(int(IPv6Address(prefix)), length)),),
                      "IngressPipe.routing.set_next_hop", (("port", port), ("smac", 0x02AA00000001),
                                                           ("dmac", 0x02BB00000001)))


# --- 2. fail a link, 3. restore it -----------------------------------------------------------

def test_fail_link_changes_exactly_what_failover_delta_says(lab: FabricLab) -> None:
    before = installed(lab)
    moved = planned_delta(lab, frozenset(), frozenset({FAILED}))

    doc = ok_json(lab.cli("fail", "link", LEAF, SPINE, "--json"))

    # the leaf itself, the other leaf of its plane (its paths to LEAF shrink), the spine
    assert sorted(moved) == sorted([LEAF, OTHER_LEAF, SPINE])
    assert doc["touched"] == [n for n in lab.names if n in moved]
    assert {n: (s["inserts"], s["modifies"], s["deletes"]) for n, s in doc["switches"].items()} == {
        n: (len(d.inserts), len(d.modifies), len(d.deletes)) for n, d in moved.items()}
    after = lab.snapshot()
    assert differences(after, {n: applied(before[n], moved.get(n)) for n in lab.names}) == []
    assert differences(after, lab.desired({FAILED})) == []
    for name in lab.names:
        if name not in moved:
            assert Counter(after[name]) == Counter(before[name]), name
    # what that means in the tables: the leaf sprays over spine 0 only and has no route to
    # spine 1's uN; the other leaf reaches LEAF through an exception group of spine 0; spine 1
    # no longer routes to LEAF
    assert groups(after[LEAF]) == {1: (1,)} and members(after[LEAF]) == {1}
    assert groups(after[OTHER_LEAF]) == {1: (1, 2), 2: (1,)}
    # (the plane aggregate still points to the shared group; LEAF's /64 to the exception group)
    spray_paths = {e.match[0][1]: e.group_id for e in after[OTHER_LEAF]  # type: ignore[union-attr]
                   if isinstance(e, TableEntry) and e.table == SPRAY_PATHS}
    assert sorted((m.prefix_len, g) for m, g in spray_paths.items()) == [(47, 1), (64, 2)]  # type: ignore[union-attr]
    assert count(after[SPINE], ROUTES_V6) == count(before[SPINE], ROUTES_V6) - 1
    assert count(after[LEAF], ROUTES_V6) == count(before[LEAF], ROUTES_V6) - 1


def test_restore_link_puts_back_the_original_plan(lab: FabricLab) -> None:
    healthy = installed(lab)
    ok_json(lab.cli("fail", "link", LEAF, SPINE, "--json"))
    failed = lab.snapshot()
    back = planned_delta(lab, frozenset({FAILED}), frozenset())

    doc = ok_json(lab.cli("restore", "link", SPINE, LEAF, "--json"))  # either order names the link

    assert doc["failures"] == [] and doc["touched"] == [n for n in lab.names if n in back]
    after = lab.snapshot()
    assert differences(after, {n: applied(failed[n], back.get(n)) for n in lab.names}) == []
    assert differences(after, healthy) == []
    assert differences(after, lab.desired()) == []


def groups(entities: list[Entity]) -> dict[int, tuple[int, ...]]:
    return {e.group_id: e.members for e in entities if isinstance(e, ActionProfileGroup)}


def members(entities: list[Entity]) -> set[int]:
    return {e.member_id for e in entities if isinstance(e, ActionProfileMember)}


def count(entities: list[Entity], table: str) -> int:
    return sum(1 for e in entities if isinstance(e, TableEntry) and e.table == table)


# --- 4. a controller killed mid-install ------------------------------------------------------

def fabricctl(lab: FabricLab, *args: str) -> subprocess.CompletedProcess:
    """The fabricctl console script's code (python3 -m fabricctl) in a process of its own."""
    return subprocess.run([sys.executable, "-m", "fabricctl", "--topology", str(lab.path), *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_install_after_a_controller_killed_mid_install_converges(lab: FabricLab) -> None:
    lab.wipe()
    want = lab.desired()
    total = sum(len(es) for es in want.values())
    limit = total // 3  # one update per request: exactly this many entities get written
    code = "import sys; from tests.bmv2.fabric_fixture import install_until_killed as run; " \
           "run(int(sys.argv[1]), sys.argv[2:])"
    proc = subprocess.Popen([sys.executable, "-c", code, str(limit), "--topology", str(lab.path), "install"],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]  # the gate, or "" if it died
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert line.strip() == GATE_LINE, f"the controller ended before the gate: {err}"
    assert proc.returncode == -signal.SIGKILL

    partial = lab.snapshot()
    assert sum(len(es) for es in partial.values()) == limit
    gaps = differences(partial, want)
    assert len(gaps) == total - limit and all(": missing " in g for g in gaps)
    # by hand: an extra route, an extra member and a route that differs from the plan
    spine_route = next(e for e in want[OTHER_SPINE] if isinstance(e, TableEntry) and e.params)
    stale: dict[str, list[Entity]] = {
        OTHER_SPINE: [stale_route("2001:db8:dead::1", 128, port=2), wrong_port(spine_route)],
        "p1-t0-1": [ActionProfileMember(SPRAY_SELECTOR, 77, VIA_SPINE, (("spine_usid", 0x1777), ("path_index", 77)))]}
    for name, entities in stale.items():
        writer = lab.connection(name, election_id=5)
        try:
            held = {e.key for e in lab.read(name)}
            writer.write([("MODIFY" if e.key in held else "INSERT", e) for e in entities])
        finally:
            writer.close()
    before = lab.snapshot()
    for name, entities in stale.items():
        assert set(entities) <= set(before[name])

    result = fabricctl(lab, "install", "--json")

    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["failed"] == 0 and doc["ok"] == len(lab.names)
    assert {n: (s["pipeline"], s["inserts"], s["modifies"], s["deletes"]) for n, s in doc["switches"].items()} == {
        n: ("kept", *map(len, (d.inserts, d.modifies, d.deletes)))
        for n, d in ((n, diff(want[n], before[n])) for n in lab.names)}
    assert differences(lab.snapshot(), want) == []


# --- 5. two controllers ----------------------------------------------------------------------

def test_a_lower_election_id_cannot_write_while_the_primary_is_connected(lab: FabricLab) -> None:
    held = installed(lab)
    sw = lab.topo.switch(LEAF)
    primary = lab.connection(LEAF, election_id=10)
    backup = lab.connection(LEAF, election_id=5)
    try:
        assert primary.is_primary and not backup.is_primary
        extra = stale_route("2001:db8:beef::1", 128, port=1)
        with pytest.raises(NotPrimaryError) as refused:
            backup.write([("INSERT", extra)])
        assert str(refused.value) == f"not primary for device {sw.device_id} on {sw.grpc_addr} (election id 5 < 10)"
        # the switch itself refuses a write carrying the backup's election id
        with grpc.insecure_channel(sw.grpc_addr) as channel:
            request = p4runtime_pb2.WriteRequest(device_id=sw.device_id, election_id=p4runtime_pb2.Uint128(low=5))
            request.updates.add(type=p4runtime_pb2.Update.INSERT, entity=encode_entity(extra, lab.p4info))
            with pytest.raises(grpc.RpcError) as denied:
                p4runtime_pb2_grpc.P4RuntimeStub(channel).Write(request, timeout=10)
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        # fabricctl with a lower id (not 5: two controllers with one id is another error): exit 4
        # naming the switch and the option, nothing written
        result = lab.cli("--election-id", "4", "install", LEAF)
        assert result.exit_code == exitcodes.PIPELINE, result.stderr
        assert result.stderr.splitlines()[0] == (
            f"error: {LEAF}: not primary for device {sw.device_id} on {sw.grpc_addr}: another controller holds "
            "an election id above 4 (see --election-id)")
        # reading needs no primary role
        assert ok_json(lab.cli("--election-id", "4", "status", LEAF, "--json"))["switches"][LEAF]["in_sync"]
        assert differences(lab.snapshot(), held) == []
    finally:
        primary.close()
    try:
        # the switch tells the backup it is primary once the primary has gone
        assert wait_for(lambda: backup.is_primary)
        assert backup.write([("INSERT", extra), ("DELETE", extra)]) == 2
    finally:
        backup.close()
    assert differences(lab.snapshot(), held) == []


def wait_for(condition, timeout: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    """Poll a condition (10 ms apart) until it holds or `timeout` passed (a bound only); its last value."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())


# --- 6. fabricctl end to end -----------------------------------------------------------------

def test_fabricctl_install_status_fail_restore(lab: FabricLab) -> None:
    lab.wipe()
    want = lab.desired()

    result = lab.cli("install")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    for name in lab.names:
        assert f"{name}: {len(want[name])} inserts, 0 modifies, 0 deletes" in lines
    assert lines[-1] == f"install: {len(lab.names)} switches ok, 0 failed"
    assert differences(lab.snapshot(), want) == []

    status = ok_json(lab.cli("status", "--json"))
    assert status["failures"] == [] and status["unreachable"] == {"0": [], "1": []}
    assert status["switches"] == {n: {"missing": 0, "extra": 0, "differing": 0, "in_sync": True} for n in lab.names}

    result = lab.cli("fail", "link", LEAF, SPINE)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[:2] == [
        f"recorded: fail link {LEAF} -- {SPINE}; 1 failure in {lab.state_path}", "unreachable: 0"]
    assert result.stdout.splitlines()[-1] == "apply: 3 switches ok, 0 failed"
    result = lab.cli("status")
    assert result.exit_code == 0, result.stderr
    assert f"  failed: link {LEAF} -- {SPINE} (operator)" in result.stdout.splitlines()
    rows = {cells[0]: cells[1:] for cells in map(str.split, result.stdout.splitlines())
            if cells and cells[0] in lab.names}
    assert rows == {n: ["0", "0", "0", "in", "sync"] for n in lab.names}
    assert differences(lab.snapshot(), lab.desired({FAILED})) == []

    # a whole spine down on top: it is not contacted, the rest follows
    doc = ok_json(lab.cli("fail", "switch", OTHER_SPINE, "--json"))
    assert OTHER_SPINE not in doc["touched"] and doc["unreachable"]
    status = ok_json(lab.cli("status", "--json"))
    assert status["switches"][OTHER_SPINE] == {"down": True}
    assert all(s["in_sync"] for n, s in status["switches"].items() if n != OTHER_SPINE)
    assert status["unreachable"]["0"] == [f"plane 0: {LEAF} unreachable from every leaf"]

    result = lab.cli("restore", "all")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"recorded: restore all failures; 0 failures in {lab.state_path}"
    status = ok_json(lab.cli("status", "--json"))
    assert status["failures"] == [] and all(s["in_sync"] for s in status["switches"].values())
    # the spine recorded down was not touched: it still holds the healthy plan
    assert differences(lab.snapshot(), want) == []


# --- per-update errors of a large batch ------------------------------------------------------

def test_a_batch_with_hundreds_of_refused_updates_names_each_and_only_those(lab: FabricLab) -> None:
    """bmv2 returns one p4.v1.Error per update in the status details trailer: for 500 updates
    that is ~40 kB, beyond gRPC's default 16 kB metadata limit."""
    held = installed(lab)
    routes = [stale_route(f"2001:db8:e::{i + 1:x}", 128, port=1) for i in range(500)]
    conn = lab.connection(OTHER_SPINE, election_id=5)
    try:
        assert conn.write([("INSERT", e) for e in routes]) == len(routes)
        new = stale_route("2001:db8:e::ffff", 128, port=2)
        with pytest.raises(WriteError) as refused:
            conn.write([("INSERT", e) for e in [*routes, new]], batch_size=len(routes) + 1)
        assert (refused.value.attempted, refused.value.written) == (len(routes) + 1, 0)
        assert [(f.update.entity, f.code) for f in refused.value.failures] == [(e, "ALREADY_EXISTS") for e in routes]
        assert Counter(conn.read_all()) == Counter([*held[OTHER_SPINE], *routes, new])
        conn.write([("DELETE", e) for e in [*routes, new]])
    finally:
        conn.close()
    assert differences(lab.snapshot(), held) == []
