"""fabricctl: every command's output, exit codes and one-line errors, without a switch."""

from __future__ import annotations

from tests.paths import UNIT_DATA

import errno
import json
import os
import shutil
import socket
import sys
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner, Result

from fabricctl import context as cli_module
from fabricctl.main import cli
from controller.plan.fabricplan import Plan, plan
from controller.routes import Fabric, Options
from controller.runtime.p4rt import SwitchConnection
from controller.model.sids import SidPlan
from controller.programs.toolchain import Artifacts
from controller.model.topology import TopologyError, load
from tests.unit.usage import says

DATA = UNIT_DATA
LAB = DATA / "two_plane_lab.yaml"


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    """A copy of the two-plane lab, so the state file lands in tmp_path."""
    path = tmp_path / "lab.yaml"
    shutil.copy(LAB, path)
    return path


def run(*args: str, env: dict[str, str | None] | None = None) -> Result:
    runner = CliRunner(env={"FABRIC_TOPOLOGY": None, **(env or {})})
    return runner.invoke(cli, list(args), prog_name="fabricctl")


def state_doc(path: Path) -> object:
    """The state file's document without its format marker (which every file we write carries)."""
    doc = json.loads(path.read_text())
    assert doc.pop("format") == "srv6-fabric-state/1"
    return doc


def unreachable_lab(tmp_path: Path) -> tuple[Path, str]:
    """The lab with every switch at a loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    doc = yaml.safe_load(LAB.read_text())
    for rec in doc["switches"]:
        rec["grpc"] = f"127.0.0.1:{port}" if rec["name"] == "p0-t0-0" else f"unix:{tmp_path}/none-{rec['name']}.sock"
    path = tmp_path / "down.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path, f"127.0.0.1:{port}"


# --- help ------------------------------------------------------------------------------------

def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in group.commands.items():
        out.append(prefix + (name,))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, prefix + (name,))
    return out


def test_top_level_help_documents_exit_codes() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for line in ("0  ok", "1  switch or gRPC errors", "2  usage or bad input", "3  the topology file is invalid",
                 "4  pipeline mismatch", "5  the P4 toolchain is missing"):
        assert line in result.stdout


@pytest.mark.parametrize("path", _commands(cli), ids=" ".join)
def test_every_command_help_shows_an_example(path: tuple[str, ...]) -> None:
    result = run(*path, "--help")
    assert result.exit_code == 0, result.output
    assert "fabricctl " in result.stdout and "Example" in result.stdout


# --- topo ------------------------------------------------------------------------------------

def test_topo_validate_good(lab: Path) -> None:
    result = run("--topology", str(lab), "topo", "validate")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == "ok: two_plane_lab: 2 planes, 4 t1 + 4 t0 switches, 4 hosts, 8 links, uSID block fcbb:bb00::/32\n"


def test_topo_validate_reports_every_problem_with_exit_3() -> None:
    bad = DATA / "bad_lab.yaml"
    result = run("--topology", str(bad), "topo", "validate")
    assert result.exit_code == 3
    assert result.stdout == ""
    with pytest.raises(TopologyError) as err:  # test_topology checks each of these messages
        load(bad)
    assert len(err.value.problems) == 7
    assert result.stderr.splitlines() == [f"error: {bad}: {p}" for p in err.value.problems]
    assert result.stderr.splitlines()[0] == f"error: {bad}: duplicate switch name 'p0-t0-1'"
    as_json = run("--topology", str(bad), "topo", "validate", "--json")
    assert as_json.exit_code == 3 and json.loads(as_json.stdout)["problems"][0] == "duplicate switch name 'p0-t0-1'"


def test_bad_topology_is_one_line_and_exit_3_for_other_commands() -> None:
    bad = DATA / "bad_lab.yaml"
    result = run("--topology", str(bad), "plan")
    assert result.exit_code == 3
    assert result.stderr == (f"error: topology {bad} is invalid: duplicate switch name 'p0-t0-1' "
                             "(+6 more; 'fabricctl topo validate' lists them)\n")


@pytest.mark.parametrize("text, problem", [
    ("switches: [\n  {name: a\n", "not valid YAML: line 3: "),
    ("- just\n- a list\n", "expected a mapping with a 'switches' list (see examples/two_plane_lab.yaml)"),
    ("name: empty\n", "no switches"),
    ("usid_block: 'fcbb::/48'\n" + LAB.read_text().split("usid_block: fcbb:bb00::/32\n", 1)[1],
     "uSID block fcbb::/48 must be a /32 (F3216), not /48"),
    (LAB.read_text().replace('"127.0.0.1:50001"', "nowhere"),
     "switch p0-t1-0: grpc: 'nowhere' is neither host:port nor unix:/path"),
])
def test_validate_checks_beyond_the_loader(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    result = run("--topology", str(path), "topo", "validate")
    assert result.exit_code == 3
    assert result.stderr.startswith(f"error: {path}: {problem}")
    assert len(result.stderr.splitlines()) == 1


def test_missing_topology_is_bad_input(tmp_path: Path) -> None:
    result = run("plan")
    assert (result.exit_code, result.stderr) == (2, "error: no topology: give --topology FILE or set FABRIC_TOPOLOGY\n")
    result = run("--topology", str(tmp_path / "nope.yaml"), "plan")
    assert (result.exit_code, result.stderr) == (2, f"error: cannot read topology {tmp_path / 'nope.yaml'}: "
                                                    f"{os.strerror(errno.ENOENT)}\n")


def test_topology_from_the_environment(lab: Path) -> None:
    result = run("topo", "show", "p0-t0-0", env={"FABRIC_TOPOLOGY": str(lab)})
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-5:] == [
        "p0-t0-0:",
        "  slot 0: port 1 -> host h0 (02:48:00:00:00:00)",
        "  slot 1: port 2 -> host h1 (02:48:00:00:00:01)",
        "  uplink: port 3 -> p0-t1-0",
        "  uplink: port 4 -> p0-t1-1",
    ]
    doc = json.loads(run("topo", "show", "--json", env={"FABRIC_TOPOLOGY": str(lab)}).stdout)
    assert [s["name"] for s in doc["switches"]][:2] == ["p0-t1-0", "p0-t1-1"] and doc["name"] == "two_plane_lab"


# --- plan ------------------------------------------------------------------------------------

SPRAY_T0 = {
    "IngressPipe.endpoint.my_sid": 16, "IngressPipe.headend.spray_dest": 8,
    "IngressPipe.headend.spray_paths": 4, "IngressPipe.headend.spray_selector/groups": 4,
    "IngressPipe.headend.spray_selector/members": 8, "IngressPipe.routing.routes_v6": 20,
    "IngressPipe.cpu.punt": 12, "IngressPipe.boundary.host_policy": 8, "all": 80,  # a probe punt entry per
    # uplink and, per leaf, one for its hosts' Neighbor Advertisements to the probe address
}  # spray_dest: per leaf the plane aggregate (derive_spray) and its own /64 (local_leaf)
SPRAY_T1 = {"IngressPipe.endpoint.my_sid": 12, "IngressPipe.routing.routes_v6": 12, "IngressPipe.cpu.punt": 8,
            "all": 32}  # my_sid: per spine its uN and, per leaf it reaches, that uN with the leaf's next hop


def test_plan_summary_counts(lab: Path) -> None:
    result = run("--topology", str(lab), "plan")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "plan of two_plane_lab for srv6_spray: 8 switches (4 t0, 4 t1), 0 failures recorded"
    rows = [line.split() for line in lines[2:]]
    assert {(r[1], int(r[2])) for r in rows if r[0] == "t0"} == set(SPRAY_T0.items())
    assert {(r[1], int(r[2])) for r in rows if r[0] == "t1"} == set(SPRAY_T1.items())


def test_plan_json_shape(lab: Path) -> None:
    doc = json.loads(run("--topology", str(lab), "plan", "--json").stdout)
    assert set(doc) == {"topology", "program", "failures", "switches", "totals", "congestion"}
    assert (doc["topology"], doc["program"], doc["failures"]) == ("two_plane_lab", "srv6_spray", [])
    assert doc["totals"] == {"t0": SPRAY_T0, "t1": SPRAY_T1}
    assert doc["switches"]["p0-t1-0"] == {"IngressPipe.endpoint.my_sid": 3, "IngressPipe.routing.routes_v6": 3,
                                          "IngressPipe.cpu.punt": 2}
    assert sum(sum(c.values()) for c in doc["switches"].values()) == 80 + 32
    one = json.loads(run("--topology", str(lab), "--program", "eecmp_qp_hash", "plan", "p0-t0-0", "--json").stdout)
    assert list(one["switches"]) == ["p0-t0-0"] and one["totals"]["t1"] == {"all": 0}
    assert one["totals"]["t0"]["IngressPipe.ecmp.routes"] == one["switches"]["p0-t0-0"]["IngressPipe.ecmp.routes"]


def test_plan_export_round_trip(lab: Path, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    result = run("--topology", str(lab), "plan", "--export", str(out))
    assert result.exit_code == 0 and result.stdout.endswith(f"exported: {out}\n")
    topo = load(lab)
    expected = plan(Fabric(topo, SidPlan.from_block("fcbb:bb00::/32"), Options()))
    assert Plan.from_json(out.read_text()) == expected
    stdout = run("--topology", str(lab), "--program", "eecmp_qp_hash", "plan", "p0-t1-0", "--export", "-").stdout
    exported = Plan.from_json(stdout)
    assert list(exported) == ["p0-t1-0"]
    assert set(exported["p0-t1-0"]) == set(plan(Fabric(topo, options=Options(program="eecmp_qp_hash")))["p0-t1-0"])


def test_plan_follows_the_recorded_failures(lab: Path) -> None:
    assert run("--topology", str(lab), "fail", "switch", "p0-t1-1", "--no-apply").exit_code == 0
    doc = json.loads(run("--topology", str(lab), "plan", "--json").stdout)
    assert doc["failures"] == [{"switch": "p0-t1-1", "text": "switch p0-t1-1"}]
    assert doc["totals"]["t0"]["IngressPipe.headend.spray_selector/members"] == 6
    healthy = json.loads(run("--topology", str(lab), "plan", "--json", "--healthy").stdout)
    assert healthy["totals"] == {"t0": SPRAY_T0, "t1": SPRAY_T1}


# --- fail / restore (recording only) ---------------------------------------------------------

def test_fail_and_restore_record_the_state_file(lab: Path) -> None:
    state = lab.parent / ".fabric-state.json"
    result = run("--topology", str(lab), "fail", "link", "p0-t1-1", "p0-t0-0", "--no-apply")
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        f"recorded: fail link p0-t0-0 -- p0-t1-1; 1 failure in {state}",
        "unreachable: 0",
        "not applied: 3 switches to reconcile (p0-t1-1, p0-t0-0, p0-t0-1); run 'fabricctl install'",
    ]
    assert state.read_text() == '{\n "format": "srv6-fabric-state/1",\n "failures": [\n  {\n   "link": [\n    "p0-t0-0",\n    "p0-t1-1"\n   ]\n  }\n ]\n}\n'
    assert run("--topology", str(lab), "fail", "port", "p0-t0-1", "h3", "--no-apply").exit_code == 0
    assert run("--topology", str(lab), "fail", "switch", "p1-t1-0", "--no-apply").exit_code == 0
    assert state_doc(state) == {"failures": [{"host_port": ["p0-t0-1", 2]}, {"link": ["p0-t0-0", "p0-t1-1"]},
                                             {"switch": "p1-t1-0"}]}
    again = run("--topology", str(lab), "fail", "switch", "p1-t1-0", "--no-apply")
    assert again.exit_code == 0 and again.stdout.startswith("nothing to do: switch p1-t1-0 is already recorded as down")
    removed = run("--topology", str(lab), "restore", "port", "p0-t0-1", "1", "--no-apply", "--json")
    doc = json.loads(removed.stdout)
    assert (doc["changed"], doc["applied"], doc["touched"]) == (True, False, ["p0-t0-1"])
    assert doc["change"] == "restore host port p0-t0-1 slot 1 (port 2, h3)"
    assert state_doc(state) == {"failures": [{"link": ["p0-t0-0", "p0-t1-1"]}, {"switch": "p1-t1-0"}]}
    assert run("--topology", str(lab), "restore", "all", "--no-apply").exit_code == 0
    assert state_doc(state) == {"failures": []}
    assert run("--topology", str(lab), "restore", "all").stdout == "nothing to do: no failure recorded\n"


def test_explicit_state_file_and_unreachable_hosts(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / "elsewhere.json"
    result = run("--topology", str(lab), "--state", str(state), "fail", "port", "p0-t0-0", "0", "--no-apply")
    assert result.stdout.splitlines()[1:3] == ["unreachable: 1", "  plane 0: h0 unreachable from every leaf"]
    assert state_doc(state) == {"failures": [{"host_port": ["p0-t0-0", 1]}]}
    assert not (lab.parent / ".fabric-state.json").exists()


# --- bad input: one line, exit 2, nothing written ---------------------------------------------

@pytest.mark.parametrize("args, message", [
    (("plan", "p0-t0-9"), "unknown switch 'p0-t0-9' (known: p0-t0-0, p0-t0-1, p0-t1-1, p1-t0-0, p1-t0-1, ...)"),
    (("install", "p0-t0-0", "spine9"), "unknown switch 'spine9' (known: p0-t0-0, p0-t0-1, p0-t1-0, p0-t1-1, p1-t0-0, ...)"),
    (("status", "p0-t1-7"), "unknown switch 'p0-t1-7' (known: p0-t0-1, p0-t1-0, p0-t1-1, p1-t1-0, p1-t1-1, ...)"),
    (("fail", "link", "p0-t0-0", "p1-t1-1"), "no link p0-t0-0 -- p1-t1-1: p0-t0-0 is in plane 0, p1-t1-1 in plane 1"),
    (("fail", "link", "p0-t0-0", "p0-t0-1"), "p0-t0-0 and p0-t0-1 are both t0 switches: a link joins a t0 and a t1"),
    (("fail", "link", "p0-t0-0", "p0-t1-5"),
     "unknown switch 'p0-t1-5' (known: p0-t0-1, p0-t1-0, p0-t1-1, p1-t1-0, p1-t1-1, ...)"),
    (("fail", "switch", "leaf"), "unknown switch 'leaf' (known: p0-t0-0, p0-t0-1, p0-t1-0, p0-t1-1, p1-t0-0, ...)"),
    (("fail", "port", "p0-t0-0", "2"), "p0-t0-0 has no host slot 2 (slots: 0 h0 (port 1), 1 h1 (port 2))"),
    (("fail", "port", "p0-t0-0", "h2"), "p0-t0-0 has no host slot or host 'h2' (slots: 0 h0 (port 1), 1 h1 (port 2))"),
    (("fail", "port", "p0-t1-0", "0"), "p0-t1-0 is a t1: host ports are on t0 switches"),
    (("restore", "link", "x", "p0-t1-0"), "unknown switch 'x' (known: p0-t0-0, p0-t0-1, p0-t1-0, p0-t1-1, p1-t0-0, ...)"),
    (("shell", "p9-t0-0"), "unknown switch 'p9-t0-0' (known: p0-t0-0, p0-t0-1, p1-t0-0, p1-t0-1, p1-t1-0, ...)"),
])
def test_bad_names_give_one_line_and_exit_2(lab: Path, args: tuple[str, ...], message: str) -> None:
    result = run("--topology", str(lab), *args)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"error: {message}\n")
    assert not (lab.parent / ".fabric-state.json").exists()


@pytest.mark.parametrize("args, message", [
    (("plan", "--bogus"), ("--bogus", "(see 'fabricctl plan --help')")),
    (("fail", "link", "p0-t0-0"), ("T1", "(see 'fabricctl fail link --help')")),
    (("--election-id", "x", "plan"), ("--election-id", "'x' is not N or HIGH,LOW", "(see 'fabricctl --help')")),
    (("--election-id", "0", "plan"),
     ("--election-id", "'0' is not between 1 and 2**128 - 1", "(see 'fabricctl --help')")),
    (("--program", "l3", "plan"), ("--program", "l3", "srv6_spray", "eecmp_qp_hash", "(see 'fabricctl --help')")),
])
def test_usage_errors_are_one_line(lab: Path, args: tuple[str, ...], message: tuple[str, ...]) -> None:
    """Exit 2, nothing on stdout, one line naming the option or argument, the value, and our hint
    (click's own framing words are click's)."""
    result = run("--topology", str(lab), *args)
    assert (result.exit_code, result.stdout) == (2, ""), result.stderr
    says(result.stderr, *message)


def test_state_file_naming_unknown_things_is_bad_input(lab: Path) -> None:
    state = lab.parent / ".fabric-state.json"
    state.write_text('{"failures": [{"link": ["p0-t0-0", "p3-t1-0"]}]}')
    result = run("--topology", str(lab), "plan")
    assert (result.exit_code, result.stderr) == (2, f"error: state file {state}: unknown switch 'p3-t1-0' "
                                                   "('fabricctl restore all' clears it)\n")
    state.write_text("{not json")
    result = run("--topology", str(lab), "status", "--offline")
    assert result.exit_code == 2 and result.stderr.startswith(f"error: state file {state}: not valid JSON: ")
    assert result.stderr.count("\n") == 1


def test_install_of_a_switch_recorded_down_is_refused(lab: Path) -> None:
    run("--topology", str(lab), "fail", "switch", "p0-t1-0", "--no-apply")
    result = run("--topology", str(lab), "install", "p0-t1-0")
    assert (result.exit_code, result.stderr) == (
        2, "error: p0-t1-0 is recorded down; restore it first ('fabricctl restore switch p0-t1-0')\n")


def test_plan_not_fitting_the_p4info_fails_before_connecting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topo, _ = unreachable_lab(tmp_path)
    mini = DATA / "mini.p4info.txtpb"
    monkeypatch.setattr(cli_module.Env, "artifacts", lambda self: Artifacts("srv6_spray", tmp_path / "x.json", mini))
    connects: list[str] = []
    monkeypatch.setattr(SwitchConnection, "connect", lambda self, timeout=None: connects.append(self.name) or True)
    result = run("--topology", str(topo), "--timeout", "5", "install")
    assert connects == []  # no connection was attempted
    assert result.exit_code == 4
    assert result.stderr.startswith(f"error: the plan does not fit {mini}: p0-t1-0: IngressPipe.endpoint.my_sid ")
    assert result.stderr.count("\n") == 1


def test_missing_p4info_is_exit_5(lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = tmp_path / "gone.p4info.txtpb"
    monkeypatch.setattr(cli_module.Env, "artifacts", lambda self: Artifacts("srv6_spray", tmp_path / "x.json", gone))
    result = run("--topology", str(lab), "install", "--dry-run")
    assert (result.exit_code, result.stderr) == (
        5, f"error: cannot read the P4Info {gone}: {os.strerror(errno.ENOENT)} (run 'fabricctl p4 compile')\n")


# --- switches that do not answer -------------------------------------------------------------

def test_install_against_an_unreachable_switch_fails_within_the_timeout(tmp_path: Path) -> None:
    topo, address = unreachable_lab(tmp_path)
    for extra in ((), ("--dry-run",)):
        result = run("--topology", str(topo), "--timeout", "0.5", "install", "p0-t0-0", *extra)
        assert result.exit_code == 1
        assert result.stderr == (f"error: p0-t0-0: no P4Runtime server at {address}: the connection failed at once "
                                 "(refused or unreachable)\n")
        assert result.stdout == f"install{' (dry run)' if extra else ''}: 0 switches ok, 1 failed (p0-t0-0)\n"
    doc = json.loads(run("--topology", str(topo), "--timeout", "0.5", "install", "p0-t0-0", "--json").stdout)
    assert doc["switches"] == {"p0-t0-0": {"ok": False, "exit_code": 1,
                                           "error": f"p0-t0-0: no P4Runtime server at {address}: the connection "
                                                    "failed at once (refused or unreachable)"}}
    assert (doc["ok"], doc["failed"], doc["dry_run"]) == (0, 1, False)


def test_fail_records_then_reports_each_switch_it_could_not_reach(tmp_path: Path) -> None:
    topo, _ = unreachable_lab(tmp_path)
    result = run("--topology", str(topo), "--timeout", "0.3", "fail", "link", "p0-t0-0", "p0-t1-0")
    assert result.exit_code == 1
    assert state_doc(tmp_path / ".fabric-state.json") == {"failures": [{"link": ["p0-t0-0", "p0-t1-0"]}]}
    assert sorted(line.split(":")[1].strip() for line in result.stderr.splitlines()) == ["p0-t0-0", "p0-t0-1", "p0-t1-0"]
    assert result.stdout.splitlines()[-1] == ("apply: 0 switches ok, 3 failed (p0-t1-0, p0-t0-0, p0-t0-1); the failure "
                                              "set is recorded: 'fabricctl install' retries them")


def test_status_offline_and_unreachable(lab: Path, tmp_path: Path) -> None:
    run("--topology", str(lab), "fail", "switch", "p1-t0-1", "--no-apply")
    result = run("--topology", str(lab), "status", "--offline")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        f"two_plane_lab (srv6_spray), state {lab.parent / '.fabric-state.json'}: 1 failure",
        "  failed: switch p1-t0-1 (operator)",
        "plane 0: every destination reachable",
        "plane 1: 1 unreachable",
        "  p1-t0-1 unreachable from every leaf",
    ]
    doc = json.loads(run("--topology", str(lab), "status", "--offline", "--json").stdout)
    assert doc["unreachable"] == {"0": [], "1": ["plane 1: p1-t0-1 unreachable from every leaf"]}
    assert doc["switches"] == {} and doc["failures"] == [{"switch": "p1-t0-1", "text": "switch p1-t0-1", "by": "operator"}]
    topo, address = unreachable_lab(tmp_path)
    online = run("--topology", str(topo), "--timeout", "0.3", "status", "p0-t0-0", "p0-t1-0", "--json")
    assert online.exit_code == 1
    assert json.loads(online.stdout)["switches"]["p0-t0-0"] == {
        "error": f"p0-t0-0: no P4Runtime server at {address}: the connection failed at once (refused or unreachable)", "exit_code": 1}


# --- shell, p4 compile -----------------------------------------------------------------------

def test_shell_command_line(lab: Path, tmp_path: Path) -> None:
    """p4runtime-shell runs from its own venv (not made by --print-command: named where it would be)."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "FABRIC_SHELL_PYTHON": None}
    result = run("--topology", str(lab), "--election-id", "2,7", "shell", "p0-t0-1", "--print-command", env=env)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == [str(tmp_path / "cache/srv6-fabric/shell-venv/bin/python"), "-m", "p4runtime_sh",
                                     "--grpc-addr", "127.0.0.1:50004", "--device-id", "4", "--election-id", "2,7"]
    assert not (tmp_path / "cache").exists()
    art = Artifacts.of("eecmp_qp_hash")
    pushed = run("--topology", str(lab), "--program", "eecmp_qp_hash", "shell", "p0-t0-1", "--print-command",
                 "--push-pipeline", env=env)
    assert pushed.stdout.split()[-2:] == ["--config", f"{art.p4info},{art.bmv2_json}"]


def test_shell_python_from_the_environment_is_checked(lab: Path, tmp_path: Path) -> None:
    """FABRIC_SHELL_PYTHON names the shell's interpreter; one without p4runtime-shell is refused (exit 5)."""
    result = run("--topology", str(lab), "shell", "p0-t0-1", "--print-command",
                 env={"FABRIC_SHELL_PYTHON": sys.executable})  # the controller's own: no p4runtime_sh here
    assert (result.exit_code, result.stdout) == (5, "")
    assert result.stderr == (f"error: FABRIC_SHELL_PYTHON={sys.executable}: p4runtime-shell is not installed there "
                             "(pip install p4runtime-shell==0.0.6 into it, or unset FABRIC_SHELL_PYTHON)\n")
    missing = run("--topology", str(lab), "shell", "p0-t0-1", "--print-command",
                  env={"FABRIC_SHELL_PYTHON": str(tmp_path / "python")})
    assert (missing.exit_code, missing.stderr) == (5, f"error: FABRIC_SHELL_PYTHON={tmp_path / 'python'}: "
                                                      "not an executable file\n")


def test_shell_needs_a_switch_that_answers(tmp_path: Path) -> None:
    topo, address = unreachable_lab(tmp_path)
    result = run("--topology", str(topo), "--timeout", "0.3", "shell", "p0-t0-0")
    assert (result.exit_code, result.stderr) == (1, f"error: p0-t0-0: no P4Runtime server at {address}: the "
                                                   "connection failed at once (refused or unreachable)\n")


def test_p4_compile_without_p4c_is_exit_5(tmp_path: Path) -> None:
    result = run("p4", "compile", "srv6_spray", "--out-dir", str(tmp_path),
                 env={"P4C": str(tmp_path / "p4c"), "P4_TOOLCHAIN_BIN": None, "PATH": str(tmp_path)})
    assert (result.exit_code, result.stderr) == (5, "error: p4c not found (PATH, $P4C or $P4_TOOLCHAIN_BIN)\n")
    assert list(tmp_path.iterdir()) == []
