"""ECN marking off on host-facing ports (`ecn_host_ports: false`, MRC's last hop): the plan's per-port
entries, their counts and failure deltas, the topology key and the global option that set it, and
reconciliation taking the entries away when marking is back on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from controller.failover import delta, with_failures
from controller.model.failures import HostPortDown
from controller.model.topology import TopologyError, build, from_dict, to_dict
from controller.plan.entries import Exact, TableEntry
from controller.plan.fabricplan import count_entities, diff_plans, plan
from controller.routes import SET_HOST_PORT_THRESHOLDS, SET_THRESHOLDS, SPRAY, THRESHOLDS, Fabric, Options
from controller.plan.p4names import EECMP
from controller.plan.delta import diff
from fabricctl import options
from fabricctl.main import cli
from tests.paths import UNIT_DATA
from tests.unit.usage import says

TOPO = build(2, 2, 3, 2)
UNSET = {name: None for _, name, _ in options.GLOBALS.values()}


def _thresholds(entities) -> list[TableEntry]:
    return [e for e in entities if isinstance(e, TableEntry) and e.table == THRESHOLDS]


def default(ecn: int, trim: int, dscp: int) -> TableEntry:
    return TableEntry(THRESHOLDS, (), SET_THRESHOLDS, (("ecn_qdepth", ecn), ("trim_qdepth", trim), ("trim_dscp", dscp)),
                      is_default=True)


def host_port(port: int, trim: int, dscp: int) -> TableEntry:
    return TableEntry(THRESHOLDS, (("port", Exact(port)),), SET_HOST_PORT_THRESHOLDS,
                      (("trim_qdepth", trim), ("trim_dscp", dscp)))


@pytest.mark.parametrize("program", [SPRAY, EECMP])
def test_off_a_leaf_gets_one_entry_per_host_port_that_keeps_trimming_and_a_spine_none(program) -> None:
    opts = Options(program=program, ecn_qdepth=20, trim_qdepth=48, trim_dscp=10, ecn_host_ports=False)
    p = plan(Fabric(TOPO, options=opts))
    for sw in TOPO.switches:
        want = [default(20, 48, 10)] + [host_port(port, 48, 10) for port in sw.host_ports]
        assert _thresholds(p[sw.name]) == want, sw.name
    assert all(_thresholds(p[s.name]) == [default(20, 48, 10)] for s in TOPO.switches if s.role == "t1")
    assert p.counts() == {n: count_entities(es) for n, es in p.items()}


def test_on_by_default_and_off_with_no_signal_on_nothing_per_port() -> None:
    assert Options().ecn_host_ports is True
    on = plan(Fabric(TOPO, options=Options(ecn_qdepth=20, trim_qdepth=48)))
    assert all(_thresholds(on[s.name]) == [default(20, 48, 46)] for s in TOPO.switches)
    quiet = plan(Fabric(TOPO, options=Options(ecn_host_ports=False)))
    assert not any(_thresholds(quiet[s.name]) for s in TOPO.switches)
    assert quiet.counts() == {n: count_entities(es) for n, es in quiet.items()}


def test_with_ecn_off_everywhere_a_host_port_still_gets_its_entry() -> None:
    """ECN 0 and trimming on: the default entry CE-marks a trimmed ECT header; on a host port the entry
    says none."""
    p = plan(Fabric(TOPO, options=Options(trim_qdepth=8, ecn_host_ports=False)))
    leaf = TOPO.switch("p0-t0-1")
    assert _thresholds(p[leaf.name]) == [default(0, 8, 46)] + [host_port(port, 8, 46) for port in leaf.host_ports]


def test_a_host_port_failure_keeps_its_entry_and_the_delta_equals_the_diff_of_whole_plans() -> None:
    f = Fabric(TOPO, options=Options(host_source_routing=True, ecn_qdepth=3, trim_qdepth=9, ecn_host_ports=False))
    leaf = TOPO.switch("p1-t0-0")
    failed = with_failures(f, [HostPortDown(leaf.name, leaf.host_ports[1])])
    assert _thresholds(plan(failed)[leaf.name]) == _thresholds(plan(f)[leaf.name])
    want = diff_plans(dict(plan(failed).items()), dict(plan(f).items()))
    assert {n: d for n, d in delta(f, failed).items() if d} == want


def test_marking_back_on_deletes_the_per_port_entries_and_keeps_the_default() -> None:
    leaf = TOPO.switch("p0-t0-0")
    off = plan(Fabric(TOPO, options=Options(ecn_qdepth=3, trim_qdepth=9, ecn_host_ports=False)))[leaf.name]
    on = plan(Fabric(TOPO, options=Options(ecn_qdepth=3, trim_qdepth=9)))[leaf.name]
    d = diff(list(on), list(off))  # desired, then what the switch holds
    assert d.deletes == tuple(host_port(port, 9, 46) for port in leaf.host_ports)
    assert not d.inserts and not d.modifies


# --- the topology key and the global option -----------------------------------------------------

def test_the_topology_key_round_trips_and_a_non_boolean_is_one_problem() -> None:
    topo = from_dict({**to_dict(TOPO), "congestion": {"ecn_qdepth": 20, "trim_qdepth": 48, "ecn_host_ports": False}})
    assert topo.congestion.ecn_host_ports is False
    assert from_dict(to_dict(topo)).congestion == topo.congestion
    with pytest.raises(TopologyError) as e:
        from_dict({**to_dict(TOPO), "congestion": {"ecn_qdepth": 20, "ecn_host_ports": 0}})
    assert e.value.problems == ["congestion: ecn_host_ports: expected true or false, got an integer"]


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    path = tmp_path / "lab.yaml"
    shutil.copy(UNIT_DATA / "two_plane_lab.yaml", path)
    return path


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner(env={**UNSET, **(env or {})}).invoke(cli, list(args), prog_name="fabricctl")


def congestion(*args: str, env: dict[str, str] | None = None) -> dict:  # type: ignore[type-arg]
    result = run(*args, "plan", "--json", env=env)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["congestion"]


def test_option_environment_config_and_topology_set_it_in_that_order(lab: Path, tmp_path: Path) -> None:
    doc = yaml.safe_load(lab.read_text())
    doc["congestion"] = {"ecn_qdepth": 5, "trim_qdepth": 50, "ecn_host_ports": False}
    lab.write_text(yaml.safe_dump(doc))
    assert congestion("--topology", str(lab))["ecn_host_ports"] is False  # topology
    config = tmp_path / "fabric.yaml"
    config.write_text("topology: lab.yaml\necn_host_ports: true\n")
    assert congestion("--config", str(config))["ecn_host_ports"] is True  # config over topology
    env = {"FABRIC_CONFIG": str(config), "FABRIC_ECN_HOST_PORTS": "false"}
    assert congestion(env=env)["ecn_host_ports"] is False  # environment over config
    assert congestion("--ecn-host-ports", env=env)["ecn_host_ports"] is True  # option over environment
    # after the subcommand too, in either form
    shown = run("--topology", str(lab), "plan", "--ecn-host-ports", "--json")
    assert json.loads(shown.stdout)["congestion"]["ecn_host_ports"] is True
    text = run("--topology", str(lab), "plan", "--ecn-qdepth", "20", "--no-ecn-host-ports").stdout
    assert text.splitlines()[-1] == ("congestion signals: ECN CE at queue depth >= 20 (not on host-facing ports), "
                                     "trimming at >= 50 (DSCP 46)")


def test_a_config_value_that_is_not_a_boolean_is_one_line_and_exit_2(lab: Path, tmp_path: Path) -> None:
    config = tmp_path / "fabric.yaml"
    config.write_text("topology: lab.yaml\necn_host_ports: 3\n")
    result = run("--config", str(config), "plan")
    assert result.exit_code == 2
    says(result.stderr, "--config", "ecn-host-ports: expected true or false, got an integer")
