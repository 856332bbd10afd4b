"""The lab orchestrator's node backends without a lab: chosen by name, placed, and what each data plane cannot do
refused by name in one line before anything is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mininet_labs.backends import nodes_for, nodes_of
from mininet_labs.lab import Lab
from mininet_labs.labstate import LabError, LabState, default_topology
from mininet_labs.nodes import Unsupported


def test_the_kernel_nodes_refuse_the_bmv2_options_by_name() -> None:
    for option in ("pcap", "tls", "cli"):
        with pytest.raises(LabError) as e:
            nodes_for("kernel", **{option: True})
        assert str(e.value) == (f"--{option} needs the bmv2 data plane: the kernel data plane has no bmv2 process "
                                "(docs/kernel.md); use --dataplane bmv2 where simple_switch_grpc is installed")
    with pytest.raises(LabError, match="^unknown data plane 'p4' \\(data planes: bmv2, kernel\\)$"):
        nodes_for("p4")


def test_a_kernel_lab_places_its_switches_in_namespaces_named_after_its_tag(tmp_path: Path) -> None:
    lab = Lab(default_topology(), tmp_path / "lab", nodes_for("kernel"), tag="zz")
    assert [s.netns for s in lab.model.switches][:2] == ["sf-zz-p0-t1-0", "sf-zz-p0-t1-1"]
    assert Lab(default_topology(), tmp_path / "lab2", nodes_for("kernel")).model.switches[0].netns == "sf-lab2-p0-t1-0"
    assert Lab(default_topology(), tmp_path / "lab").model.switches[0].netns is None  # bmv2: the root namespace
    assert not (tmp_path / "lab").exists()  # nothing is made before up()


def test_what_the_kernel_lab_cannot_do_is_said_by_its_backend(tmp_path: Path) -> None:
    lab = Lab(default_topology(), tmp_path / "lab", nodes_for("kernel"), tag="zz")
    for act in (lambda: lab.kill_switch("p0-t1-0"), lab.client, lab.cli):
        with pytest.raises(Unsupported) as e:
            act()
        assert str(e.value).startswith("the kernel data plane has no ") and "\n" not in str(e.value)
    with pytest.raises(Unsupported, match="^the kernel data plane has no P4Runtime \\(its switches are programmed "):
        lab.p4info()
    with pytest.raises(Unsupported, match="eecmp_qp_hash pipeline"):
        lab.nodes.check(lab.model, "zz", "eecmp_qp_hash")


def test_the_saved_state_names_the_backend_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    state = LabState(str(tmp_path), str(tmp_path / "topology.yaml"), "srv6_spray", "zz", 1, dataplane="kernel",
                     namespaces={"h0": "sf-zz-h0"})
    state.write(tmp_path / "lab-state.json")
    back = LabState.read(tmp_path / "lab-state.json")
    assert back == state and nodes_of(back).dataplane == "kernel"
    doc = json.loads((tmp_path / "lab-state.json").read_text())
    for key, value, problem in (("dataplane", "p4", "dataplane 'p4' is not one of bmv2, kernel"),
                                ("namespaces", {"h0": "h0"}, "namespaces must be sf-* names")):
        (tmp_path / "lab-state.json").write_text(json.dumps({**doc, key: value}))
        with pytest.raises(LabError) as e:
            LabState.read(tmp_path / "lab-state.json")
        assert str(e.value).endswith(f"is malformed: {problem}")
