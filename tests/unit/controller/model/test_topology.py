"""Topology: parametric build, YAML loading, and every validation message."""

from __future__ import annotations


import pytest

from controller.model.topology import TopologyError, build, from_dict, load, to_dict
from tests.paths import REPO, UNIT_DATA

DATA = UNIT_DATA
ROOT = REPO


def test_example_equals_parametric_build() -> None:
    lab = load(ROOT / "examples" / "two_plane_lab.yaml")
    built = build(2, 2, 2, 2, name="two_plane_lab")
    assert [s.name for s in lab.switches] == [s.name for s in built.switches]
    for a, b in zip(lab.switches, built.switches):
        assert (a.plane, a.role, a.index, a.host_ports, a.uplinks, a.downlinks, a.mac) == \
               (b.plane, b.role, b.index, b.host_ports, b.uplinks, b.downlinks, b.mac)
        assert [lab.host_mac(a, k) for k in range(len(a.host_ports))] == \
               [built.host_mac(b, k) for k in range(len(b.host_ports))]
    assert lab.usid_block == "fcbb:bb00::/32"
    assert lab.hosts["h3"][1].plane == 1 and lab.hosts["h3"][1].t0 == 1 and lab.hosts["h3"][1].slot == 1


def test_dict_round_trip() -> None:
    topo = build(2, 3, 4, 2)
    again = from_dict(to_dict(topo))
    assert again.switches == tuple(
        s if s.role == "t1" else type(s)(**{**{f: getattr(s, f) for f in s.__slots__},  # type: ignore[attr-defined]
                                            "host_macs": again.switch(s.name).host_macs})
        for s in topo.switches)


def test_build_layout_skips_cpu_port_and_shares_tuples() -> None:
    topo = build(1, 4, 2, 253)
    leaf = topo.t0(0, 0)
    assert leaf.host_ports[-1] == 253 and leaf.uplinks == (254, 256, 257, 258)
    assert topo.t0(0, 1).uplinks is leaf.uplinks
    assert topo.t1(0, 3).downlinks == (1, 2)


def test_single_plane_and_graph() -> None:
    topo = build(1, 2, 3, 1)
    g = topo.graph
    assert g.number_of_nodes() == 2 + 3 + 3 and g.number_of_edges() == 2 * 3 + 3
    assert g.edges["p0-t0-2", "p0-t1-1"]["ports"] == {"p0-t0-2": 3, "p0-t1-1": 3}


def test_bad_file_reports_every_problem() -> None:
    with pytest.raises(TopologyError) as err:
        load(DATA / "bad_lab.yaml")
    assert err.value.problems == [
        "duplicate switch name 'p0-t0-1'",
        "link p0-t0-0 -- p1-t1-0 crosses planes 0 and 1",
        "port 300 of p0-t0-0 out of range 1..256",
        "port 3 of p0-t0-1 used twice (to p0-t1-0 and h1)",
        "port 255 of p0-t0-1 is the CPU port",
        "host h1 has 2 NICs in plane 0 (p0-t0-0 port 1, p0-t0-1 port 3)",
        "host h3 has no NIC in plane 1",
    ]
    assert str(err.value).splitlines() == err.value.problems


def _doc(**changes: object) -> dict[str, object]:
    doc = to_dict(build(1, 2, 2, 1))
    for name, values in changes.items():
        rec = next(s for s in doc["switches"] if s["name"] == name.replace("_", "-"))  # type: ignore[union-attr]
        rec.update(values)  # type: ignore[arg-type]
    return doc


@pytest.mark.parametrize("changes, problems", [
    ({"p0_t1_1": {"downlinks": {"p0-t0-0": 1}}}, ["link p0-t0-1 -- p0-t1-1 has no port on p0-t1-1"]),
    ({"p0_t0_1": {"uplinks": {"p0-t1-0": 2}}, "p0_t1_1": {"downlinks": {"p0-t0-0": 1}}},
     ["p0-t0-1 has no link to p0-t1-1"]),
    ({"p0_t0_0": {"uplinks": {"p0-t1-0": 2, "p0-t1-1": 3, "p0-t1-9": 4}}},
     ["p0-t0-0 links to unknown switch 'p0-t1-9'"]),
    ({"p0_t0_0": {"uplinks": {"p0-t1-0": 2, "p0-t1-1": 3, "p0-t0-1": 4}}},
     ["link p0-t0-0 -- p0-t0-1 joins two t0 switches"]),
    ({"p0_t0_1": {"device_id": 1}}, ["device id 1 used by p0-t1-0 and p0-t0-1"]),
    ({"p0_t0_1": {"mac": 1234}}, ["MAC 1234 of p0-t0-1 is not a quoted xx:xx:xx:xx:xx:xx string"]),
    ({"p0_t0_1": {"role": "t2"}}, ["switch p0-t0-1 has role 't2', expected 't0' or 't1'"]),
    ({"p0_t0_1": {"index": 5}}, ["plane 0 has no t0 with index 1, 2, 3, 4"]),
    ({"p0_t0_0": {"hosts": {"h0": "x"}}}, ["port 'x' of p0-t0-0 is not an integer (got a string)"]),
])
def test_single_problems(changes: dict[str, dict[str, object]], problems: list[str]) -> None:
    with pytest.raises(TopologyError) as err:
        from_dict(_doc(**changes))
    assert err.value.problems == problems


def test_build_rejects_what_does_not_fit_bmv2_ports() -> None:
    with pytest.raises(TopologyError) as err:
        build(8, 256, 512, 256)
    assert err.value.problems == [
        "a t0 needs 512 data ports: port 513 is beyond max_port 510 (the CPU port 255 is skipped)",
        "a t1 needs 512 data ports: port 513 is beyond max_port 510 (the CPU port 255 is skipped)",
    ]
    with pytest.raises(TopologyError, match="planes must be at least 1, got 0"):
        build(0, 1, 1, 1)
