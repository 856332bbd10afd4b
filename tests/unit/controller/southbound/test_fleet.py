"""Each switch's southbound chosen from its topology record (`netns:` -> netlink, else P4Runtime), and the record's
checks; no switch and no namespace is contacted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controller import exitcodes, planning
from controller.model.topology import TopologyError, from_dict, load, to_dict
from controller.model.congestion import Thresholds
from controller.southbound import fleet
from controller.southbound.kroutes import switch_routes
from controller.southbound.netlink import NetlinkBatch
from tests.paths import LAB_YAML


def _doc(netns: dict[str, Any]) -> dict[str, Any]:
    """The two-plane lab's document with `netns:` set on the named switches."""
    doc = yaml.safe_load(LAB_YAML.read_text())
    for rec in doc["switches"]:
        if rec["name"] in netns:
            rec["netns"] = netns[rec["name"]]
    return doc


ALL_NS = {n: f"sf-t-{n}" for n in ("p0-t1-0", "p0-t1-1", "p0-t0-0", "p0-t0-1", "p1-t1-0", "p1-t1-1", "p1-t0-0",
                                    "p1-t0-1")}


class Unloadable(Exception):
    """The P4Info loader was asked for (the test's loader raises this)."""


def _no_p4info() -> Any:
    raise Unloadable("the P4Info was asked for")


def test_older_topology_files_load_unchanged_every_switch_on_p4runtime() -> None:
    topo = load(LAB_YAML)
    assert all(s.netns is None and fleet.kind_of(s) == "p4runtime" for s in topo.switches)
    assert all("netns" not in rec for rec in to_dict(topo)["switches"])
    assert fleet.where(topo.switch("p0-t0-0")) == "grpc 127.0.0.1:50003"


def test_the_namespace_round_trips_and_chooses_netlink_per_switch() -> None:
    topo = from_dict(_doc({"p0-t0-0": "sf-lab-p0-t0-0"}))
    assert topo.switch("p0-t0-0").netns == "sf-lab-p0-t0-0"
    assert fleet.kind_of(topo.switch("p0-t0-0")) == "netlink"
    assert fleet.kind_of(topo.switch("p0-t0-1")) == "p4runtime"
    assert fleet.where(topo.switch("p0-t0-0")) == "netns sf-lab-p0-t0-0"
    again = from_dict(to_dict(topo))
    assert {s.name: s.netns for s in again.switches} == {s.name: s.netns for s in topo.switches}
    recs = {r["name"]: r for r in to_dict(topo)["switches"]}
    assert recs["p0-t0-0"]["netns"] == "sf-lab-p0-t0-0" and "netns" not in recs["p0-t0-1"]


@pytest.mark.parametrize(("value", "problem"), [
    ("a/b", "switch p0-t0-0: netns: 'a/b' is not a network namespace name (1-255 letters, digits, '.', '_' or '-', "
            "as 'ip netns list' shows them)"),
    ("..", "switch p0-t0-0: netns: '..' is not a network namespace name (1-255 letters, digits, '.', '_' or '-', "
           "as 'ip netns list' shows them)"),
    ("", "switch p0-t0-0: netns: '' is not a network namespace name (1-255 letters, digits, '.', '_' or '-', "
         "as 'ip netns list' shows them)"),
    (7, "switch p0-t0-0: netns: expected a network namespace name (a string), got an integer"),
])
def test_a_bad_namespace_name_is_one_clear_problem(value: Any, problem: str) -> None:
    with pytest.raises(TopologyError) as e:
        from_dict(_doc({"p0-t0-0": value}))
    assert e.value.problems[0] == problem  # (the switch is left out, so its hosts lack a NIC: said after it)


def test_two_switches_in_one_namespace_are_refused() -> None:
    with pytest.raises(TopologyError) as e:
        from_dict(_doc({"p0-t0-0": "sf-x", "p1-t0-1": "sf-x"}))
    assert e.value.problems == ["network namespace sf-x used by p0-t0-0 and p1-t0-1"]


def test_prepare_groups_switches_by_southbound_and_loads_the_p4info_only_for_p4runtime_ones() -> None:
    topo = from_dict(_doc(ALL_NS))
    f = fleet.Fleet(topo, "srv6_spray", election_id=1, timeout=1.0, p4info=_no_p4info)
    fabric = planning.fabric(topo, "srv6_spray")
    ready = f.prepare(fabric, ["p0-t0-0", "p0-t1-1"])  # all netlink: no P4Info needed
    assert ready.names == ["p0-t0-0", "p0-t1-1"]
    (batch,) = ready.batches
    assert isinstance(batch, NetlinkBatch) and batch.names == ["p0-t0-0", "p0-t1-1"]
    assert batch.routes["p0-t0-0"] == switch_routes(fabric, topo.switch("p0-t0-0"))
    route = batch.routes["p0-t0-0"][0]
    assert ready.text("p0-t0-0", route) == route.text() and ready.to_json("p0-t0-0", route) == {"route": route.text()}

    mixed = from_dict(_doc({"p0-t0-0": "sf-t-p0-t0-0"}))
    g = fleet.Fleet(mixed, "srv6_spray", election_id=1, timeout=1.0, p4info=_no_p4info)
    assert fleet.kind_of(mixed.switch("p0-t0-0")) == "netlink"
    g.prepare(planning.fabric(mixed, "srv6_spray"), ["p0-t0-0"])  # the netlink one alone: fine
    with pytest.raises(Unloadable):  # a P4Runtime switch among them: its southbound loads the P4Info
        g.prepare(planning.fabric(mixed, "srv6_spray"), ["p0-t0-0", "p0-t0-1"])


def test_what_the_kernel_cannot_do_is_refused_naming_the_switch_before_any_contact() -> None:
    topo = from_dict(_doc(ALL_NS))
    f = fleet.Fleet(topo, "srv6_spray", election_id=1, timeout=1.0, p4info=_no_p4info)
    import dataclasses

    ecn = dataclasses.replace(topo, congestion=Thresholds(ecn_qdepth=10))
    with pytest.raises(exitcodes.OpError) as e:
        f.prepare(planning.fabric(ecn, "srv6_spray"), ["p0-t1-1"])
    assert e.value.code == exitcodes.BAD_INPUT
    assert str(e.value) == ("p0-t1-1 is on the kernel data plane (namespace sf-t-p0-t1-1): ECN marking and trimming "
                            "thresholds are P4 egress features: the kernel data plane has neither")
    with pytest.raises(exitcodes.OpError) as e:
        f.prepare(planning.fabric(topo, "eecmp_qp_hash"), ["p0-t0-0"])
    assert str(e.value).startswith("p0-t0-0 is on the kernel data plane (namespace sf-t-p0-t0-0): the kernel data "
                                   "plane runs srv6_spray's plan, not eecmp_qp_hash")


def test_p4runtime_only_features_name_the_first_switch_in_a_namespace() -> None:
    topo = from_dict(_doc({"p0-t0-1": "sf-t-p0-t0-1"}))
    fleet.require_p4runtime(topo, ["p0-t0-0", "p1-t1-0"], "the shell")  # P4Runtime switches: nothing said
    with pytest.raises(exitcodes.OpError) as e:
        fleet.require_p4runtime(topo, [s.name for s in topo.switches], "the shell")
    assert str(e.value) == ("the shell needs P4Runtime switches: p0-t0-1 is on the kernel data plane (network "
                            "namespace sf-t-p0-t0-1), programmed over netlink (docs/kernel.md)")
    assert e.value.code == exitcodes.BAD_INPUT


def test_the_kernel_lab_names_every_switch_namespace_in_its_topology(tmp_path: Path) -> None:
    from mininet_labs.kernel.nodes import in_namespaces

    topo = in_namespaces(load(LAB_YAML), "lab1")
    assert {s.name: s.netns for s in topo.switches} == {n: f"sf-lab1-{n}" for n in ALL_NS}
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(to_dict(topo), sort_keys=False))
    assert {s.name: s.netns for s in load(path).switches} == {n: f"sf-lab1-{n}" for n in ALL_NS}
