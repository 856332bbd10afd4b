"""The loop agent's frames (exact fields, the UDP checksum scapy computes), its hysteresis, and `fabricctl endpoint
denylist` over hand-made reports."""

from __future__ import annotations

import json
import struct

from click.testing import CliRunner

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from controller.model.topology import build
from controller.plan.evs import export
from controller.routes import Fabric
from endpoint.ev import EvState
from endpoint.loopprobe import LOOP_PORT, Hysteresis, loop_frame, main, parse_loop, push_denials
from fabricctl.main import cli
from tests.unit.endpoint.test_endpoint_cli import sender  # noqa: F401  (the fixture: a sender on a control socket)

A, B = ("p0-t0-0", "p0-t1-1"), ("p0-t1-1", "p0-t0-0")


def test_a_loop_frame_is_the_carrier_around_a_udp_packet_to_the_host_itself():
    f = loop_frame("02:48:00:00:00:00", "02:5f:00:00:00:00", "fd00:0:400::1", "fcbb:bb00:2:400:fff::", 7, 3, 123456789)
    pkt = Ether(f)
    outer = pkt[IPv6]
    assert (outer.src, outer.dst, outer.nh, outer.hlim) == ("fd00:0:400::1", "fcbb:bb00:2:400:fff::", 41, 64)
    inner = outer.payload
    assert isinstance(inner, IPv6) and (inner.src, inner.dst, inner.nh) == ("fd00:0:400::1", "fd00:0:400::1", 17)
    udp = inner[UDP]
    assert (udp.sport, udp.dport) == (LOOP_PORT, LOOP_PORT)
    again = IPv6(bytes(inner))
    del again[UDP].chksum  # scapy computes it again on build
    assert IPv6(bytes(again))[UDP].chksum == udp.chksum != 0
    assert parse_loop(f) is None  # still encapsulated: not back yet
    back = f[:14] + f[14 + 40:]  # what the leaf's End.DT6 hands back (Ethernet rewritten: not looked at)
    assert parse_loop(back) == (7, 3, 123456789)
    assert parse_loop(back[:-1]) is None
    other = bytearray(back)
    struct.pack_into("!H", other, 14 + 40 + 2, 4791)
    assert parse_loop(bytes(other)) is None


def test_a_link_is_reported_after_confirm_rounds_in_a_row_and_cleared_after_as_many_without():
    h = Hysteresis(confirm=2)
    assert not h.update(frozenset({A}))  # once: a loop lost by chance
    assert not h.update(frozenset())
    assert not h.update(frozenset({A}))
    assert h.update(frozenset({A, B})) and h.reported == {A}
    assert h.update(frozenset({A, B})) and h.reported == {A, B}
    assert not h.update(frozenset({B}))  # A clean once: still reported
    assert not h.update(frozenset({A, B}))  # A again: its clean count starts over
    assert not h.update(frozenset({B}))
    assert h.update(frozenset({B})) and h.reported == {B}
    assert not h.update(frozenset())
    assert h.update(frozenset()) and h.reported == set()


def test_bad_arguments_are_one_line_and_exit_2(capsys, tmp_path):
    assert main(["--topology", "t.yaml", "--host", "h0", "--state", str(tmp_path / "s.json"), "--period-ms", "0"]) == 2
    err = capsys.readouterr().err
    assert err == "--period-ms and --timeout-ms must be above 0, --confirm at least 1\n"
    assert not (tmp_path / "s.json").exists()


def _report(host: str, failed: list[tuple[str, str, str]]) -> str:
    return json.dumps({"host": host, "failed": [{"from": a, "to": b, "kind": k} for a, b, k in failed], "denied": {}})


def test_fabricctl_endpoint_denylist_merges_the_hosts_reports_with_who_saw_each_link(tmp_path):
    (tmp_path / "loops-h0.json").write_text(_report("h0", [(*A, "t0-t1"), (*B, "t1-t0")]))
    (tmp_path / "loops-h2.json").write_text(_report("h2", [(*B, "t1-t0")]))
    (tmp_path / "loops-h3.json").write_text(_report("h3", []))
    r = CliRunner().invoke(cli, ["endpoint", "denylist", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines() == ["3 host(s) reporting: h0, h2, h3",
                                     "p0-t0-0 -> p0-t1-1 (t0-t1): seen by h0",
                                     "p0-t1-1 -> p0-t0-0 (t1-t0): seen by h0, h2"]
    (tmp_path / "evs.json").write_text(json.dumps(export(Fabric(build(2, 4, 2, 2)))))
    r = CliRunner().invoke(cli, ["endpoint", "denylist", str(tmp_path), "--json"])
    doc = json.loads(r.output)
    assert doc["links"][1] == {"from": "p0-t1-1", "to": "p0-t0-0", "seen_by": ["h0", "h2"], "kind": "t1-t0"}
    one = [1]  # EV 1: plane 0, spine 1
    assert doc["denied"] == {"h0": {"h2": one, "h3": one}, "h1": {"h2": one, "h3": one},
                             "h2": {"h0": one, "h1": one}, "h3": {"h0": one, "h1": one}}
    r = CliRunner().invoke(cli, ["endpoint", "denylist", str(tmp_path)])
    assert r.output.splitlines()[-1] == "h3 denies h0: 0x0001; h1: 0x0001"


def test_fabricctl_endpoint_denylist_refuses_a_directory_without_reports_in_one_line(tmp_path):
    r = CliRunner().invoke(cli, ["endpoint", "denylist", str(tmp_path)])
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1].endswith(
        f"no loop agent's report (loops-HOST.json) in {tmp_path}")
    (tmp_path / "loops-h0.json").write_text("{}")
    r = CliRunner().invoke(cli, ["endpoint", "denylist", str(tmp_path)])
    assert r.exit_code == 2 and "loops-h0.json: not a loop agent's report" in r.output


def test_the_agent_denies_at_a_running_sender_and_takes_back_what_is_clean(sender):
    s, d = sender  # h0's sender towards h2: EVs 0, 1 (plane 0), 1024, 1025 (plane 1)
    path = str(d / "control-h0.sock")
    assert push_denials([path], {}, {"h2": [1024], "h3": [1]}) == []  # h0 does not send to h3: nothing to do there
    assert s.tables["h2"][1024].state == EvState.DENIED and s.tables["h2"][0].state == EvState.UNKNOWN
    assert push_denials([path], {"h2": [1024]}, {"h2": [0, 1024]}) == []
    assert (s.tables["h2"][0].state, s.tables["h2"][1024].state) == (EvState.DENIED, EvState.DENIED)
    assert push_denials([path], {"h2": [0, 1024]}, {}) == []
    assert {e: s.tables["h2"][e].state for e in (0, 1, 1024, 1025)} == dict.fromkeys((0, 1, 1024, 1025), EvState.UNKNOWN)
    assert push_denials([path], {}, {"h2": [7]}) == [f"{path}: h0 has no EV 0x7 towards h2 (EVs: 0x0, 0x1, 0x400, 0x401)"]
    gone = str(d / "control-h9.sock")
    assert push_denials([gone], {}, {"h2": [0]}) == [f"no endpoint sender listens at {gone}"]
