"""The plan's SR-domain boundary per host port, endpoint mode (Options.host_source_routing or the
topology's `host_source_routing: true`) and the ECN / trimming thresholds."""

from __future__ import annotations

import pytest

from controller import planning
from controller.plan.entries import Exact, TableEntry
from controller.failover import delta, with_failures
from controller.model.failures import HostPortDown
from controller.plan.fabricplan import count_entities, diff_plans, plan
from controller.routes import (
    FIRST_USID_ALLOWED,
    HOST_FIRST_USID,
    HOST_POLICY,
    HOST_SOURCE_ROUTING,
    SPRAY,
    SR_BOUNDARY,
    SET_THRESHOLDS,
    THRESHOLDS,
    Fabric,
    Options,
)
from controller.plan.p4names import EECMP
from controller.model.sids import SidPlan, fmt_v6
from controller.model.topology import TopologyError, build, from_dict, to_dict

TOPO = build(2, 2, 3, 2)


def _table(entities, table: str) -> list[TableEntry]:
    return [e for e in entities if isinstance(e, TableEntry) and e.table == table]


def test_every_host_port_is_the_sr_boundary_with_its_hosts_own_address_by_default() -> None:
    p = plan(Fabric(TOPO))
    leaf = TOPO.switch("p1-t0-2")
    got = _table(p[leaf.name], HOST_POLICY)
    sids = SidPlan()
    # one entry per host port for the boundary and the headend: the host's address, the block, the
    # port's DX6 SID as the encapsulation's source, the headend on
    assert got == [TableEntry(HOST_POLICY, (("ingress_port", Exact(port)),), SR_BOUNDARY,
                              (("host_addr", f"fd00:1:2::{k + 1}"), ("usid_block", sids.block),
                               ("src_addr", fmt_v6(sids.local_sid(sids.t0_usid(1, 2), sids.dx6_usid(1, k)))),
                               ("headend", 1)))
                   for k, port in enumerate(leaf.host_ports)]
    assert got[0].params[2] == ("src_addr", "fcbb:bb00:1402:1c00::")
    assert not any(_table(p[n], HOST_FIRST_USID) for n in p)
    assert not any(_table(p[n], THRESHOLDS) for n in p)
    assert all(not _table(p[s.name], HOST_POLICY) for s in TOPO.switches if s.role == "t1")


def test_endpoint_mode_lets_carriers_start_at_the_leafs_spines_or_itself() -> None:
    p = plan(Fabric(TOPO, options=Options(host_source_routing=True)))
    leaf = TOPO.switch("p1-t0-2")
    assert {e.action for e in _table(p[leaf.name], HOST_POLICY)} == {HOST_SOURCE_ROUTING}
    first = _table(p[leaf.name], HOST_FIRST_USID)
    assert sorted(e.match[0][1].value for e in first) == [0x1001, 0x1002, 0x1402]  # spines 0, 1; the leaf
    assert {e.action for e in first} == {FIRST_USID_ALLOWED}


def test_a_host_port_that_fails_keeps_its_boundary_and_turns_its_headend_off() -> None:
    f = Fabric(TOPO)
    leaf = TOPO.switch("p0-t0-1")
    failed = with_failures(f, [HostPortDown("p0-t0-1", leaf.host_ports[0])])
    d = delta(f, failed)
    changed = d[leaf.name]
    assert not [e for e in changed.deletes if isinstance(e, TableEntry) and e.table == HOST_POLICY]
    before, after = _table(plan(f)[leaf.name], HOST_POLICY), _table(plan(failed)[leaf.name], HOST_POLICY)
    assert [e for e in changed.modifies if isinstance(e, TableEntry) and e.table == HOST_POLICY] == [after[0]]
    assert after[0].params == (*before[0].params[:3], ("headend", 0))  # boundary and source kept
    assert after[1:] == before[1:]


@pytest.mark.parametrize("program", [SPRAY, EECMP])
def test_thresholds_go_to_every_switch_as_the_default_entry(program) -> None:
    opts = Options(program=program, ecn_qdepth=20, trim_qdepth=48, trim_dscp=10)
    p = plan(Fabric(TOPO, options=opts))
    want = TableEntry(THRESHOLDS, (), SET_THRESHOLDS, (("ecn_qdepth", 20), ("trim_qdepth", 48), ("trim_dscp", 10)),
                      is_default=True)
    assert all(_table(p[s.name], THRESHOLDS) == [want] for s in TOPO.switches)
    assert p.counts() == {n: count_entities(es) for n, es in p.items()}


def test_counts_in_endpoint_mode_equal_the_entities() -> None:
    p = plan(Fabric(TOPO, options=Options(host_source_routing=True, trim_qdepth=5)))
    assert p.counts() == {n: count_entities(es) for n, es in p.items()}


def test_failure_delta_in_endpoint_mode_equals_the_diff_of_whole_plans() -> None:
    f = Fabric(TOPO, options=Options(host_source_routing=True, ecn_qdepth=3))
    failed = with_failures(f, [HostPortDown("p1-t0-0", TOPO.switch("p1-t0-0").host_ports[1])])
    want = diff_plans(dict(plan(failed).items()), dict(plan(f).items()))
    assert {n: d for n, d in delta(f, failed).items() if d} == want


def test_the_topology_key_turns_endpoint_mode_on_for_the_cli_plans() -> None:
    doc = to_dict(TOPO)
    assert "host_source_routing" not in doc
    on = from_dict({**doc, "host_source_routing": True})
    assert on.host_source_routing and to_dict(on)["host_source_routing"] is True
    assert planning.fabric(on, SPRAY).options.host_source_routing
    assert not planning.fabric(TOPO, SPRAY).options.host_source_routing
    assert planning.fabric(TOPO, SPRAY, options=Options(host_source_routing=True)).options.host_source_routing


@pytest.mark.parametrize("value", ["yes", 1, None, [True]])
def test_the_topology_key_must_be_a_boolean(value) -> None:
    with pytest.raises(TopologyError) as e:
        from_dict({**to_dict(TOPO), "host_source_routing": value})
    assert f"host_source_routing must be true or false, got {value!r}" in str(e.value)
