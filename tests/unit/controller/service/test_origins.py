"""Who recorded a failure: the state file's origins (version 1 and 2, migration, bad input), the
detector's merge that restores only its own failures, the healer on a state file, `fabricctl
fail/restore/status` with origins, and the hand-off to a running controller's status file."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fabricctl.main import cli
from controller.planning import failure_change
from controller.state.statefile import load_origins, load_state, save_state
from controller.model.failures import HostPortDown, LinkDown, SwitchDown
from controller.southbound.base import PlanChange
from controller.service import handoff
from controller.service.healer import Healer
from controller.service.origins import merge
from controller.service.status import status_path, write_status
from controller.model.failures import DETECTOR, FORMAT, OPERATOR, StateFileError, origins_from_text
from controller.model.topology import load
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
A, B, C = LinkDown("p0-t0-0", "p0-t1-1"), LinkDown("p0-t0-1", "p0-t1-0"), LinkDown("p1-t0-0", "p1-t1-0")


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    path = tmp_path / "lab.yaml"
    shutil.copy(DATA / "two_plane_lab.yaml", path)
    return path


def run(*args: str) -> Result:
    return CliRunner(env={"FABRIC_TOPOLOGY": None}).invoke(cli, list(args), prog_name="fabricctl")


# --- the state file ------------------------------------------------------------------------------

def test_operator_failures_are_written_as_version_1_byte_for_byte(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    save_state(state, [A, SwitchDown("p1-t1-0")])
    assert state.read_text() == ('{\n "format": "srv6-fabric-state/1",\n "failures": [\n  {\n   "link": [\n'
                                 '    "p0-t0-0",\n    "p0-t1-1"\n   ]\n  },\n  {\n   "switch": "p1-t1-0"\n  }\n ]\n}\n')
    assert load_origins(state) == {A: OPERATOR, SwitchDown("p1-t1-0"): OPERATOR}


def test_a_detected_failure_makes_version_2_with_by_on_every_failure(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    save_state(state, [A, B], {A: DETECTOR})
    assert json.loads(state.read_text()) == {"format": "srv6-fabric-state/2", "failures": [
        {"link": ["p0-t0-0", "p0-t1-1"], "by": "detector"}, {"link": ["p0-t0-1", "p0-t1-0"], "by": "operator"}]}
    assert load_origins(state) == {A: DETECTOR, B: OPERATOR}
    assert load_state(state) == {A, B}


def test_save_keeps_the_recorded_origin_of_a_kept_failure_and_gives_new_ones_the_operator(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    save_state(state, [A], {A: DETECTOR})
    save_state(state, [A, B])  # what a one-shot command does: it names no origin
    assert load_origins(state) == {A: DETECTOR, B: OPERATOR}
    save_state(state, [B])  # the detected one removed: back to version 1
    assert json.loads(state.read_text())["format"] == "srv6-fabric-state/1"


def test_version_1_and_marker_less_files_are_read_as_the_operators(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    state.write_text('{"failures": [{"link": ["p0-t0-0", "p0-t1-1"]}, {"host_port": ["p0-t0-0", 1]}]}')
    assert load_origins(state) == {A: OPERATOR, HostPortDown("p0-t0-0", 1): OPERATOR}
    state.write_text('{"format": "srv6-fabric-state/2", "failures": [{"switch": "x"}]}')  # "by" left out
    assert load_origins(state) == {SwitchDown("x"): OPERATOR}


@pytest.mark.parametrize("text, error", [
    ('{"format": "srv6-fabric-state/1", "failures": [{"switch": "x", "by": "detector"}]}',
     'failures[0] is not one of {"link": [T0, T1]}, {"switch": NAME}, {"host_port": [T0, PORT]}'),
    ('{"format": "srv6-fabric-state/2", "failures": [{"switch": "x", "by": "robot"}]}',
     'failures[0].by: "robot" is not one of "operator", "detector"'),
    ('{"format": "srv6-fabric-state/2", "failures": [{"switch": "x", "by": ["detector"]}]}',
     'failures[0].by: ["detector"] is not one of "operator", "detector"'),
    ('{"format": "srv6-fabric-state/3", "failures": []}',
     'not a fabricctl state file (expected {"format": "srv6-fabric-state/1" or "srv6-fabric-state/2", '
     '"failures": [...]}, found keys failures, format)'),
])
def test_bad_origins_are_one_line_errors(text: str, error: str) -> None:
    with pytest.raises(StateFileError) as e:
        origins_from_text(text)
    assert str(e.value) == error


def test_a_failure_listed_twice_is_the_operators_if_either_says_so() -> None:
    text = json.dumps({"format": FORMAT, "failures": [{"switch": "x", "by": "detector"},
                                                               {"switch": "x", "by": "operator"}]})
    assert origins_from_text(text) == {SwitchDown("x"): OPERATOR}


def test_bad_origin_in_the_state_file_is_one_line_and_the_file_untouched(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    state.write_text('{"format": "srv6-fabric-state/2", "failures": [{"switch": "p1-t1-0", "by": "me"}]}')
    before = state.read_bytes()
    r = run("--topology", str(lab), "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply")
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == (f'error: state file {state}: failures[0].by: "me" is not one of "operator", "detector"\n')
    assert state.read_bytes() == before


# --- the detector's merge --------------------------------------------------------------------------

def test_merge_restores_only_what_the_detector_recorded() -> None:
    m = merge({A: DETECTOR, B: OPERATOR}, downs=set(), ups={A, B}, detected=set())
    assert m.record == {B: OPERATOR}
    assert (m.removed, m.added, m.held) == ({A: DETECTOR}, {}, (B,))


def test_merge_records_a_new_down_as_the_detectors_and_leaves_an_operators_alone() -> None:
    m = merge({B: OPERATOR}, downs={A, B}, ups=set(), detected={A, B})
    assert m.record == {A: DETECTOR, B: OPERATOR}
    assert (m.added, m.removed, m.held) == ({A: DETECTOR}, {}, ())


def test_merge_records_again_a_link_the_operator_restored_while_its_probes_fail() -> None:
    m = merge({}, downs=set(), ups=set(), detected={A})  # 'restore' removed A; the detector holds it down
    assert m.record == {A: DETECTOR} and m.added == {A: DETECTOR}


@pytest.mark.parametrize("origin_a, origin_b", list(itertools.product([None, OPERATOR, DETECTOR], repeat=2)))
def test_merge_never_touches_an_operators_failure_whatever_the_probes_say(origin_a, origin_b) -> None:
    recorded = {f: o for f, o in ((A, origin_a), (B, origin_b), (SwitchDown("p1-t1-1"), OPERATOR)) if o}
    for downs, ups in itertools.product([set(), {A}, {B}, {A, B}], repeat=2):
        ups = ups - downs
        detected = set(downs)
        m = merge(recorded, downs, ups, detected)
        for f, o in recorded.items():
            if o == OPERATOR:
                assert m.record[f] == OPERATOR
            elif f in ups:
                assert f not in m.record
        for f in downs:
            assert f in m.record
        assert set(m.added) | set(recorded) - set(m.removed) == set(m.record)


# --- the healer on a state file (its sessions never ready: nothing is written to a switch) -----------

class Idle:
    """A session that is never ready: the healer records, and keeps the switch for a full reconcile."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ready = False

    def plan_delta(self, change: PlanChange) -> object:
        return change.p4_deltas().get(self.name) or None  # never written: the session is not ready


def healer(lab: Path, state: Path, events: list) -> Healer:
    topo = load(lab)
    return Healer(topo, "srv6_spray", state, {s.name: Idle(s.name) for s in topo.switches},  # type: ignore[arg-type]
                  lambda kind, **f: events.append({"kind": kind, **f}))


def test_healer_restores_its_own_failure_and_holds_the_operators(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    save_state(state, [B])  # an operator's, made before the controller started
    events: list = []
    h = healer(lab, state, events)
    h.link_changed(A, True)
    h.tick()
    assert load_origins(state) == {A: DETECTOR, B: OPERATOR}
    assert events[0] == {"kind": "failures_recorded", "added": ["link p0-t0-0 -- p0-t1-1"], "removed": [],
                         "by": {"link p0-t0-0 -- p0-t1-1": "detector"}, "count": 2}
    h.link_changed(A, False)
    h.link_changed(B, False)
    h.tick()
    assert load_origins(state) == {B: OPERATOR}
    kinds = [e["kind"] for e in events]
    assert "restore_held" in kinds
    held = next(e for e in events if e["kind"] == "restore_held")
    assert held["link"] == ["p0-t0-1", "p0-t1-0"] and held["by"] == "operator"
    removed = [e for e in events if e["kind"] == "failures_recorded"][-1]
    assert removed["removed"] == ["link p0-t0-0 -- p0-t1-1"] and removed["by"] == {"link p0-t0-0 -- p0-t1-1": "detector"}
    assert h.applied == {B}
    topo = load(lab)
    touched = {*failure_change(topo, "srv6_spray", {B}, {A, B}).touched, *failure_change(topo, "srv6_spray", {A, B}, {B}).touched}
    assert h.pending == sorted(touched) != []  # no session ready: each waits for a full reconcile


def test_healer_records_again_a_restored_link_its_probes_still_see_down(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    events: list = []
    h = healer(lab, state, events)
    h.link_changed(A, True)
    h.tick()
    save_state(state, [])  # 'fabricctl restore all' while the link is still down
    h.tick()
    assert load_origins(state) == {A: DETECTOR}


def test_a_seeded_detected_failure_stays_recorded_until_its_probes_come_back(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    save_state(state, [A, B], {A: DETECTOR})
    h = healer(lab, state, [])
    h.seed({A})
    h.tick()
    assert load_origins(state) == {A: DETECTOR, B: OPERATOR}
    h.link_changed(A, False)
    h.tick()
    assert load_origins(state) == {B: OPERATOR}


# --- the one-shot commands -------------------------------------------------------------------------

def test_failing_a_detected_failure_again_makes_it_the_operators(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    save_state(state, [A], {A: DETECTOR})
    r = run("--topology", str(lab), "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[0] == (f"recorded: fail link p0-t0-0 -- p0-t1-1; 1 failure in {state}; "
                                        "held by the operator now (the controller had detected it)")
    assert load_origins(state) == {A: OPERATOR}
    r = run("--topology", str(lab), "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply")
    assert r.stdout.startswith("nothing to do: link p0-t0-0 -- p0-t1-1 is already recorded as down")


def test_status_names_who_recorded_each_failure(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    save_state(state, [A, SwitchDown("p1-t1-0")], {A: DETECTOR})
    r = run("--topology", str(lab), "status", "--offline")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[1:3] == ["  failed: link p0-t0-0 -- p0-t1-1 (detected)",
                                          "  failed: switch p1-t1-0 (operator)"]
    doc = json.loads(run("--topology", str(lab), "status", "--offline", "--json").stdout)
    assert [(f["text"], f["by"]) for f in doc["failures"]] == [("link p0-t0-0 -- p0-t1-1", "detector"),
                                                                ("switch p1-t1-0", "operator")]


def controller_view(state: Path, **fields: object) -> dict:
    """A status file naming this test process as a controller primary on every switch."""
    view = {"pid": os.getpid(), "election_id": 10, "updated": time.time(), "read_mono_ns": 0, "applied": [],
            "recorded": [], "pending": [], "sessions": {"p0-t0-0": {"role": "primary"}}, **fields}
    write_status(status_path(state), view)
    return view


def test_with_a_running_controller_that_never_applies_the_command_records_and_times_out(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    controller_view(state)  # a controller (this process) that never reads the record again
    t0 = time.monotonic()
    r = run("--topology", str(lab), "--timeout", "0.5", "fail", "link", "p0-t0-0", "p0-t1-1")
    assert r.exit_code == 1
    assert r.stderr == (f"error: the running controller (pid {os.getpid()}, election id 10) did not report applying "
                        "the change within 0.5 s; it is recorded, and the controller applies it when it can "
                        "('fabricctl events')\n")
    assert time.monotonic() - t0 >= 0.5  # it waited (no upper bound asserted: the machine is shared)
    assert load_origins(state) == {A: OPERATOR}
    assert r.stdout.splitlines()[0] == f"recorded: fail link p0-t0-0 -- p0-t1-1; 1 failure in {state}"


def test_no_apply_with_a_running_controller_says_who_applies_it(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    controller_view(state)
    r = run("--topology", str(lab), "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[-1] == (f"not applied by this command: the running controller (pid {os.getpid()}, "
                                         "election id 10) applies the recorded set")


def test_a_backup_only_controller_is_not_handed_the_change(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    controller_view(state, sessions={"p0-t0-0": {"role": "backup"}})
    assert handoff.running(state) is None
    controller_view(state, pid=2 ** 22 + 4321)  # a dead pid
    assert handoff.running(state) is None


# --- the hand-off's verdict on status views ------------------------------------------------------

def test_verdict_waits_for_a_read_after_the_save_then_checks_the_applied_set(tmp_path: Path) -> None:
    h = handoff.Handoff(tmp_path / "s.json", handoff.Controller(os.getpid(), 10), saved_ns=1000, added=frozenset({A}))
    base = {"pid": os.getpid(), "applied": [{"link": ["p0-t0-0", "p0-t1-1"]}], "recorded": [], "pending": []}
    assert h.verdict({**base, "read_mono_ns": 999}) is None  # read before the save: says nothing yet
    assert h.verdict({**base, "read_mono_ns": 1001, "applied": []}) is None  # read, not yet applied
    assert h.verdict({**base, "read_mono_ns": 1001, "pending": ["p0-t1-1"]}) is None  # a switch still to write
    assert h.verdict({**base, "read_mono_ns": 1001}) == handoff.Outcome(True, 0.0)
    assert h.verdict({**base, "read_mono_ns": 1001, "pid": 1}) is None  # another controller's view


def test_verdict_on_a_restore_the_detector_recorded_again(tmp_path: Path) -> None:
    h = handoff.Handoff(tmp_path / "s.json", handoff.Controller(7, 10), saved_ns=1000, removed=frozenset({A}),
                        describe=lambda f: "link p0-t0-0 -- p0-t1-1")
    view = {"pid": 7, "read_mono_ns": 2000, "applied": [{"link": ["p0-t0-0", "p0-t1-1"]}], "pending": [],
            "recorded": [{"link": ["p0-t0-0", "p0-t1-1"], "by": "detector"}]}
    out = h.verdict(view)
    assert out is not None and not out.ok
    assert out.error == ("the running controller (pid 7, election id 10) keeps link p0-t0-0 -- p0-t1-1 failed: its "
                         "probes still fail, so its detector recorded it again ('fabricctl status' shows them)")
    assert h.verdict({**view, "applied": [], "recorded": []}) == handoff.Outcome(True, 0.0)


def test_a_backup_leaves_a_live_primarys_status_file_alone(tmp_path: Path) -> None:
    from controller.service.status import may_write, remove_status

    path = status_path(tmp_path / ".fabric-state.json")
    assert may_write(path, 123, primary_somewhere=False)  # no file yet
    write_status(path, {"pid": os.getpid(), "sessions": {"s1": {"role": "primary"}}})  # a live primary (this process)
    before = path.read_bytes()
    assert not may_write(path, 123, primary_somewhere=False)
    assert may_write(path, 123, primary_somewhere=True)
    remove_status(path, 123)  # a backup stopping: not its file
    assert path.read_bytes() == before
    write_status(path, {"pid": os.getpid(), "sessions": {"s1": {"role": "backup"}}})
    assert may_write(path, 123, primary_somewhere=False)  # the other is a backup too: either may publish
    remove_status(path, os.getpid())
    assert not path.exists()


def test_host_ports_follow_the_same_rule_as_links(lab: Path, tmp_path: Path) -> None:
    port = HostPortDown("p0-t0-1", 1)
    m = merge({port: OPERATOR, A: DETECTOR}, downs={HostPortDown("p1-t0-0", 1)}, ups={port, A}, detected=set())
    assert m.record == {port: OPERATOR, HostPortDown("p1-t0-0", 1): DETECTOR} and m.held == (port,)
    state = tmp_path / ".fabric-state.json"
    save_state(state, [port])
    events: list = []
    h = healer(lab, state, events)
    h.link_changed(port, False)
    h.tick()
    assert load_origins(state) == {port: OPERATOR}
    held = [e for e in events if e["kind"] == "restore_held"]
    assert held == [{"kind": "restore_held", "port": ["p0-t0-1", 1], "failure": "host port p0-t0-1 slot 0 (port 1, h2)",
                     "by": "operator", "why": "probes came back, but an operator recorded this failure: it stays "
                                               "until 'fabricctl restore'"}]
