"""fabricctl on a topology whose switches name network namespaces (the kernel data plane): what the kernel cannot do
is refused in one line, naming the switch, before any switch is contacted or anything recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from controller.state.statefile import load_state
from fabricctl.main import cli
from tests.unit.controller.southbound.test_fleet import ALL_NS, _doc


@pytest.fixture
def kernel_topo(tmp_path: Path) -> Path:
    """The two-plane lab, every switch in a namespace that does not exist (nothing may be contacted)."""
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(_doc({n: f"sf-none-{n}" for n in ALL_NS}), sort_keys=False))
    return path


def run(*args: str) -> Result:
    return CliRunner(env={"FABRIC_TOPOLOGY": None}).invoke(cli, list(args), prog_name="fabricctl")


def test_run_on_a_kernel_topology_refuses_by_name_what_a_namespace_cannot_carry(kernel_topo: Path) -> None:
    r = run("--topology", str(kernel_topo), "run", "--period", "20", "--host-probe-every", "2", "--duration", "1")
    assert r.exit_code == 2  # --period applies on the kernel too (its link probes); the host probes do not
    assert r.stderr == ("error: --host-probe-every cannot be used here: p0-t1-0 is a netlink switch (netns "
                        "sf-none-p0-t1-0) and it cannot punt a host's Neighbor Advertisement to the controller\n")
    assert not (kernel_topo.parent / ".fabric-state.json").exists()
    assert not (kernel_topo.parent / "fabric-events.jsonl").exists()


def test_run_refuses_a_program_the_kernel_switches_cannot_carry_before_any_is_contacted(kernel_topo: Path) -> None:
    r = run("--topology", str(kernel_topo), "--program", "eecmp_qp_hash", "run", "--duration", "1")
    assert r.exit_code == 2
    assert r.stderr.startswith("error: p0-t1-0 is on the kernel data plane (namespace sf-none-p0-t1-0): the kernel "
                               "data plane runs srv6_spray's plan, not eecmp_qp_hash")
    assert not (kernel_topo.parent / "fabric-events.jsonl").exists()


def test_run_holds_a_fabric_mixing_data_planes_each_switch_by_its_record(tmp_path: Path) -> None:
    """One controller over both: the P4 switches are P4Runtime sessions, the namespace a netlink switch; one that
    does not exist is one line naming it."""
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump(_doc({"p1-t0-0": "sf-none-p1-t0-0"}), sort_keys=False))
    r = run("--topology", str(path), "run", "--duration", "1")
    assert r.exit_code == 1
    assert r.stderr == "error: p1-t0-0: cannot open namespace sf-none-p1-t0-0: No such file or directory\n"
    assert load_state(tmp_path / ".fabric-state.json") == frozenset()
    assert not (tmp_path / "fabric-events.jsonl").exists()


def test_the_shell_refuses_a_switch_in_a_namespace(kernel_topo: Path) -> None:
    r = run("--topology", str(kernel_topo), "shell", "p0-t0-1", "--print-command")
    assert r.exit_code == 2
    assert r.stderr == ("error: the P4Runtime shell needs P4Runtime switches: p0-t0-1 is on the kernel data plane "
                        "(network namespace sf-none-p0-t0-1), programmed over netlink (docs/kernel.md)\n")


ECN_REFUSED = ("error: p0-t1-0 is on the kernel data plane (namespace sf-none-p0-t1-0): ECN marking and trimming "
               "thresholds are P4 egress features: the kernel data plane has neither\n")


@pytest.mark.parametrize("command", [["install"], ["status"], ["install", "--dry-run"]])
def test_ecn_thresholds_are_refused_before_any_switch(kernel_topo: Path, command: list[str]) -> None:
    """The namespaces do not exist: contacting one would say 'cannot open namespace' instead."""
    r = run("--topology", str(kernel_topo), "--ecn-qdepth", "10", *command)
    assert (r.exit_code, r.stderr) == (2, ECN_REFUSED)


def test_a_failure_the_kernel_cannot_apply_is_not_recorded(kernel_topo: Path) -> None:
    r = run("--topology", str(kernel_topo), "--trim-qdepth", "20", "fail", "link", "p0-t0-0", "p0-t1-1")
    assert r.exit_code == 2
    assert r.stderr == ("error: p0-t1-1 is on the kernel data plane (namespace sf-none-p0-t1-1): ECN marking and "
                        "trimming thresholds are P4 egress features: the kernel data plane has neither\n")
    assert load_state(kernel_topo.parent / ".fabric-state.json") == frozenset()  # nothing recorded


def test_another_program_is_refused(kernel_topo: Path) -> None:
    r = run("--topology", str(kernel_topo), "--program", "eecmp_qp_hash", "install", "p0-t0-0")
    assert r.exit_code == 2
    assert r.stderr.startswith("error: p0-t0-0 is on the kernel data plane (namespace sf-none-p0-t0-0): the kernel "
                               "data plane runs srv6_spray's plan, not eecmp_qp_hash")


def test_a_bad_namespace_in_the_topology_is_one_line_exit_3(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_doc({"p0-t0-0": "sf/../../etc"}), sort_keys=False))
    r = run("--topology", str(path), "install")
    assert r.exit_code == 3
    assert r.stderr.splitlines()[0].startswith(
        f"error: topology {path} is invalid: switch p0-t0-0: netns: 'sf/../../etc' is not a network namespace name")
    assert len(r.stderr.splitlines()) == 1


def test_topo_show_names_each_switch_namespace(kernel_topo: Path) -> None:
    r = run("--topology", str(kernel_topo), "topo", "show")
    assert r.exit_code == 0
    row = next(line for line in r.stdout.splitlines() if line.startswith("p0-t0-1 "))
    assert "netns sf-none-p0-t0-1" in row


def test_the_demo_refuses_a_plot_into_a_missing_folder_before_starting_anything(tmp_path: Path) -> None:
    png = tmp_path / "nowhere" / "demo.png"
    r = run("lab", "demo", "--dir", str(tmp_path / "lab"), "--png", str(png))
    assert r.exit_code == 2
    assert r.stderr == f"error: --png {png}: no folder {png.parent}\n"
    assert not (tmp_path / "lab").exists() and not png.parent.exists()
