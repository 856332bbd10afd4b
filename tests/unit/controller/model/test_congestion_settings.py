"""ECN and trimming thresholds set by a network engineer: the topology's `congestion:` key, the global
options (--ecn-qdepth, --trim-qdepth, --trim-dscp, FABRIC_*, --config) over it, their checks, the plan
they give, and reconciliation putting a switch's thresholds back to the program's default when
they are turned off."""

from __future__ import annotations

from tests.paths import UNIT_DATA

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from controller.model import congestion
from controller import planning
from fabricctl import options
from fabricctl.main import cli
from controller.plan.entries import TableEntry
from controller.plan.fabricplan import plan
from controller.plan.delta import diff, with_resets
from controller.routes import DEFAULT_RESETS, SET_THRESHOLDS, SPRAY, THRESHOLDS
from controller.model.topology import TopologyError, build, from_dict, to_dict
from tests.unit.usage import says

LAB = UNIT_DATA / "two_plane_lab.yaml"
UNSET = {name: None for _, name, _ in options.GLOBALS.values()}
TOPO = build(2, 2, 2, 1)


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner(env={**UNSET, **(env or {})}).invoke(cli, list(args), prog_name="fabricctl")


def thresholds(ecn: int, trim: int, dscp: int) -> TableEntry:
    return TableEntry(THRESHOLDS, (), SET_THRESHOLDS, (("ecn_qdepth", ecn), ("trim_qdepth", trim), ("trim_dscp", dscp)),
                      is_default=True)


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    path = tmp_path / "lab.yaml"
    shutil.copy(LAB, path)
    return path


def with_key(lab: Path, value: object) -> Path:
    doc = yaml.safe_load(lab.read_text())
    doc["congestion"] = value
    lab.write_text(yaml.safe_dump(doc))
    return lab


def plan_json(*args: str, env: dict[str, str] | None = None) -> dict:  # type: ignore[type-arg]
    result = run(*args, "plan", "--json", env=env)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


# --- the topology key --------------------------------------------------------------------------

def test_the_topology_key_puts_the_thresholds_on_every_switch_and_round_trips() -> None:
    topo = from_dict({**to_dict(TOPO), "congestion": {"ecn_qdepth": 20, "trim_qdepth": 48, "trim_dscp": 10}})
    assert topo.congestion == congestion.Thresholds(20, 48, 10)
    assert from_dict(to_dict(topo)).congestion == topo.congestion
    p = plan(planning.fabric(topo, SPRAY))
    assert all([e for e in p[s.name] if isinstance(e, TableEntry) and e.table == THRESHOLDS] == [thresholds(20, 48, 10)]
               for s in topo.switches)
    assert "congestion" not in to_dict(TOPO)
    assert not any(isinstance(e, TableEntry) and e.table == THRESHOLDS for es in plan(planning.fabric(TOPO, SPRAY)).values()
                   for e in es)


def test_a_trim_threshold_alone_keeps_the_default_trim_class() -> None:
    topo = from_dict({**to_dict(TOPO), "congestion": {"trim_qdepth": 8}})
    assert topo.congestion == congestion.Thresholds(0, 8, congestion.TRIM_DSCP)


@pytest.mark.parametrize("value, problem", [
    ("on", "congestion: expected a mapping of ecn_qdepth, trim_qdepth, trim_dscp, ecn_host_ports, got a string"),
    ({"ecn": 3}, "congestion: unknown key 'ecn' (known: ecn_qdepth, trim_qdepth, trim_dscp, ecn_host_ports)"),
    ({"ecn_qdepth": 9, "ecn_host_ports": "no"}, "congestion: ecn_host_ports: expected true or false, got a string"),
    ({"ecn_qdepth": "20"}, "congestion: ecn_qdepth: expected an integer 0..524287, got a string '20'"),
    ({"ecn_qdepth": True}, "congestion: ecn_qdepth: expected an integer 0..524287, got a boolean 'True'"),
    ({"trim_qdepth": 1 << 19}, "congestion: trim_qdepth: 524288 is out of range 0..524287"),
    ({"ecn_qdepth": -1}, "congestion: ecn_qdepth: -1 is out of range 0..524287"),
    ({"trim_qdepth": 9, "trim_dscp": 64}, "congestion: trim_dscp: 64 is out of range 0..63"),
    ({"trim_qdepth": 9, "trim_dscp": 0}, "congestion: trim_dscp: 0 is the class every unmarked packet has"),
    ({"ecn_qdepth": 9, "trim_qdepth": 9}, "congestion: trim_qdepth (9) must be above ecn_qdepth (9)"),
])
def test_bad_topology_thresholds_are_one_problem_each(value, problem: str) -> None:
    with pytest.raises(TopologyError) as e:
        from_dict({**to_dict(TOPO), "congestion": value})
    assert len(e.value.problems) == 1 and e.value.problems[0].startswith(problem), e.value.problems


def test_fabricctl_refuses_a_topology_with_bad_thresholds_with_exit_3(lab: Path) -> None:
    result = run("--topology", str(with_key(lab, {"ecn_qdepth": 30, "trim_qdepth": 10})), "plan")
    assert result.exit_code == 3
    assert result.stderr == (f"error: topology {lab} is invalid: congestion: trim_qdepth (10) must be above ecn_qdepth "
                             "(30): packets are CE-marked first and trimmed only when the queue grows further\n")


# --- the global options ------------------------------------------------------------------------

def test_the_options_set_the_thresholds_and_the_plan_shows_them(lab: Path) -> None:
    off = plan_json("--topology", str(lab))
    assert off["congestion"] == {"ecn_qdepth": 0, "trim_qdepth": 0, "trim_dscp": 46, "ecn_host_ports": True}
    assert THRESHOLDS not in off["totals"]["t0"]
    on = plan_json("--topology", str(lab), "--ecn-qdepth", "20", "--trim-qdepth", "48", "--trim-dscp", "10")
    assert on["congestion"] == {"ecn_qdepth": 20, "trim_qdepth": 48, "trim_dscp": 10, "ecn_host_ports": True}
    assert on["totals"]["t0"][THRESHOLDS] == 4 and on["totals"]["t1"][THRESHOLDS] == 4
    text = run("--topology", str(lab), "plan", "--ecn-qdepth", "20", "--trim-qdepth", "48").stdout
    assert text.splitlines()[-1] == "congestion signals: ECN CE at queue depth >= 20, trimming at >= 48 (DSCP 46)"
    assert "congestion signals" not in run("--topology", str(lab), "plan").stdout


def test_precedence_option_environment_config_topology(lab: Path, tmp_path: Path) -> None:
    with_key(lab, {"ecn_qdepth": 5, "trim_qdepth": 50})
    config = tmp_path / "fabric.yaml"
    config.write_text("topology: lab.yaml\necn_qdepth: 6\n")
    assert plan_json("--topology", str(lab))["congestion"]["ecn_qdepth"] == 5  # topology
    assert plan_json("--config", str(config))["congestion"] == {"ecn_qdepth": 6, "trim_qdepth": 50, "trim_dscp": 46,
                                                               "ecn_host_ports": True}
    env = {"FABRIC_CONFIG": str(config), "FABRIC_ECN_QDEPTH": "7"}
    assert plan_json(env=env)["congestion"]["ecn_qdepth"] == 7  # environment over config
    assert plan_json("--ecn-qdepth", "8", env=env)["congestion"]["ecn_qdepth"] == 8  # option over environment
    off = plan_json("--topology", str(lab), "--ecn-qdepth", "0", "--trim-qdepth", "0")
    assert off["congestion"]["ecn_qdepth"] == 0 and THRESHOLDS not in off["totals"]["t1"]  # turned off


@pytest.mark.parametrize("args, env, message", [
    (["--ecn-qdepth", "-1"], {}, ("--ecn-qdepth", "-1", "524287")),  # click's range and integer checks
    (["--trim-qdepth", "lots"], {}, ("--trim-qdepth", "lots")),
    (["--trim-dscp", "64"], {}, ("--trim-dscp", "64", "63")),
    ([], {"FABRIC_ECN_QDEPTH": "1e3"}, ("--ecn-qdepth", "1e3")),
    (["--trim-qdepth", "9", "--trim-dscp", "0"], {},
     ("error: --trim-dscp: 0 is the class every unmarked packet has; a trimmed packet needs its own (1-63)",)),
    (["--ecn-qdepth", "60"], {}, ("error: --trim-qdepth (50) must be above ecn_qdepth (60)",)),
])
def test_bad_options_are_one_line_and_exit_2_and_nothing_is_written(lab: Path, args, env,
                                                                     message: tuple[str, ...]) -> None:
    with_key(lab, {"trim_qdepth": 50})
    state = lab.parent / "state.json"
    result = run("--topology", str(lab), "--state", str(state), *args, "fail", "switch", "p0-t1-0", "--no-apply",
                 env=env)
    assert result.exit_code == 2, result.output
    says(result.stderr, *message)
    assert not state.exists()


def test_config_file_thresholds_are_checked_like_the_options(lab: Path, tmp_path: Path) -> None:
    config = tmp_path / "fabric.yaml"
    config.write_text("topology: lab.yaml\ntrim_dscp: true\n")
    result = run("--config", str(config), "plan")
    assert result.exit_code == 2
    says(result.stderr, "--config", "trim-dscp: expected a string or number, got a boolean")


# --- turning them off resets the switch ---------------------------------------------------------

def test_reconcile_resets_thresholds_the_plan_no_longer_sets() -> None:
    on, off = thresholds(20, 48, 46), thresholds(0, 0, 0)
    assert DEFAULT_RESETS == (off,)
    d = diff(with_resets([], DEFAULT_RESETS), [on])
    assert d.modifies == (off,) and not d.inserts and not d.deletes
    assert not diff(with_resets([], DEFAULT_RESETS), [off])  # already the program's default: nothing written
    assert not diff(with_resets([on], DEFAULT_RESETS), [on])  # the plan's own thresholds win over the reset
    assert diff([], [on]) == diff([], [])  # without resets a default entry only on the switch is left alone

