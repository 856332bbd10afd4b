"""P4Info index: lookups by name, alias and id; close-match errors; pipeline comparison."""

from __future__ import annotations


import pytest

from controller.runtime.p4info import P4Info, UnknownNameError, pipeline_differences, same_pipeline
from controller.programs.toolchain import PROGRAMS, Artifacts

from tests.unit.conftest import MINI



def test_table_by_full_name_and_alias(p4info: P4Info) -> None:
    by_alias = p4info.table("routes_v6")
    assert by_alias is p4info.table("IngressPipe.routing.routes_v6")
    assert by_alias.id == 33554433
    assert by_alias.size == 1024
    assert by_alias.implementation_id == 0
    (field,) = by_alias.match_fields
    assert (field.id, field.name, field.bitwidth, field.match_type) == (1, "dst_addr", 128, "LPM")
    assert p4info.table.by_id(33554433) is by_alias


def test_table_with_selector(p4info: P4Info) -> None:
    table = p4info.table("spray_paths")
    profile = p4info.profile_of(table)
    assert profile is not None and profile is p4info.action_profile("IngressPipe.headend.spray_selector")
    assert profile.with_selector and profile.table_ids == (table.id,)
    assert profile.max_group_size == 16
    assert p4info.profile_of(p4info.table("routes_v6")) is None


def test_ternary_table_needs_priority(p4info: P4Info) -> None:
    assert p4info.table("punt").needs_priority
    assert not p4info.table("routes_v6").needs_priority
    assert [f.name for f in p4info.table("punt").match_fields] == ["ether_type", "standard_metadata.ingress_port"]


def test_action_params_in_p4info_order(p4info: P4Info) -> None:
    action = p4info.action("set_next_hop")
    assert [(p.id, p.name, p.bitwidth) for p in action.params] == [(1, "port", 9), (2, "smac", 48), (3, "dmac", 48)]
    assert action.param("dmac").id == 3


def test_same_short_name_resolved_by_alias(p4info: P4Info) -> None:
    assert p4info.action("routing.drop").name == "IngressPipe.routing.drop"
    assert p4info.action("cpu.drop").name == "IngressPipe.cpu.drop"


def test_counters_and_packet_metadata(p4info: P4Info) -> None:
    c = p4info.counter("drop_reasons")
    assert (c.name, c.size, c.unit) == ("IngressPipe.drop_reasons", 16, "PACKETS")
    assert p4info.counter("path_packets").unit == "BOTH"
    out = p4info.packet_metadata("packet_out")
    assert [(f.id, f.name, f.bitwidth) for f in out.fields] == [(1, "egress_port", 9), (2, "_pad", 7)]


def test_unknown_name_lists_close_matches(p4info: P4Info) -> None:
    with pytest.raises(UnknownNameError) as err:
        p4info.table("route_v6")
    assert str(err.value) == "unknown table 'route_v6' in P4Info; did you mean routes_v6?"
    with pytest.raises(UnknownNameError, match=r"^unknown action 'flood' in P4Info$"):
        p4info.action("flood")
    with pytest.raises(UnknownNameError, match="unknown parameter of action IngressPipe.routing.set_next_hop 'prot'.*port"):
        p4info.action("set_next_hop").param("prot")
    with pytest.raises(UnknownNameError, match="unknown counter id 7"):
        p4info.counter.by_id(7)


def test_action_must_belong_to_table(p4info: P4Info) -> None:
    routes = p4info.table("routes_v6")
    with pytest.raises(ValueError) as err:
        p4info.table_action(routes, "send_to_cpu")
    assert str(err.value) == (
        "action IngressPipe.cpu.send_to_cpu is not an entry action of table IngressPipe.routing.routes_v6; allowed: "
        "IngressPipe.routing.set_next_hop, IngressPipe.routing.drop_usid_unknown, IngressPipe.routing.drop"
    )
    assert p4info.table_action(routes, "NoAction", default=True).name == "NoAction"
    with pytest.raises(ValueError, match="NoAction is not an entry action of table IngressPipe.routing.routes_v6"):
        p4info.table_action(routes, "NoAction")
    with pytest.raises(ValueError, match="^table IngressPipe.headend.host_port has a const default action; its default entry cannot change$"):
        p4info.table_action(p4info.table("host_port"), "NoAction", default=True)


def test_same_pipeline_ignores_annotations_and_docs(p4info: P4Info) -> None:
    other = P4Info.from_text(MINI.read_text())
    other.message.tables[0].preamble.annotations.append('@doc("x")')
    other.message.pkg_info.arch = "psa"
    assert same_pipeline(p4info, P4Info(other.message))
    assert p4info == P4Info(other.message)


def test_pipeline_differences_name_what_differs(p4info: P4Info) -> None:
    msg = P4Info.from_text(MINI.read_text()).message
    msg.actions[1].params[0].bitwidth = 10  # set_next_hop port
    del msg.counters[1]
    t = msg.tables.add()
    t.preamble.id, t.preamble.name = 0x02000099, "IngressPipe.extra"
    assert pipeline_differences(p4info, P4Info(msg)) == [
        "table IngressPipe.extra (id 0x2000099) only on the other side",
        "action IngressPipe.routing.set_next_hop (id 0x1000001) differs",
        "counter IngressPipe.headend.path_packets (id 0x12004002) missing on the other side",
    ]
    assert not same_pipeline(p4info, P4Info(msg))


# --- the project's compiled P4Info (p4/build), once it exists -----------------------------

_NAMES = {
    "srv6_spray": {
        "table": ["host_policy", "spray_dest", "pinned_path", "spray_paths", "my_sid", "routes_v6", "punt"],
        "action_profile": ["spray_selector"],
        "counter": ["port_rx", "port_tx", "path_packets", "drop_reasons"],
        "action": ["sr_boundary", "host_source_routing", "set_spray", "via_spine", "encap_carrier", "encap_srh2",
                   "encap_srh3", "usid_un", "usid_un_next_hop", "end", "end_dx6", "end_dt6", "drop_usid_unknown", "send_to_cpu"],
    },
    "eecmp_qp_hash": {
        "table": ["hash_policy", "routes", "punt"],
        "action_profile": ["ecmp_selector"],
        "counter": ["member_packets", "port_rx", "port_tx", "drop_reasons"],
        "action": ["set_hash_mode", "set_pin", "send_to_cpu"],
    },
}


def _compiled(program: str) -> P4Info:
    path = Artifacts.of(program).p4info
    return P4Info.load(path)


@pytest.mark.parametrize("program", PROGRAMS)
def test_compiled_p4info_resolves_every_name_and_alias(program: str) -> None:
    p4info = _compiled(program)
    for kind in ("table", "action", "action_profile", "counter", "packet_metadata"):
        index = getattr(p4info, kind)
        for item in index.items:
            assert index(item.name) is item and index(item.alias) is item and index.by_id(item.id) is item
    assert same_pipeline(p4info, _compiled(program))


@pytest.mark.parametrize("program", sorted(_NAMES))
def test_compiled_p4info_has_the_documented_names(program: str) -> None:
    p4info = _compiled(program)
    for kind, names in _NAMES[program].items():
        for name in names:
            getattr(p4info, kind)(name)  # raises UnknownNameError with close matches
    selector = p4info.action_profile(_NAMES[program]["action_profile"][0])
    assert selector.with_selector
    for meta in ("packet_in", "packet_out"):
        p4info.packet_metadata(meta)
