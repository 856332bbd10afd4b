"""The one-shot commands on a kernel lab's topology.yaml, run as a user would (`fabricctl --topology <lab>/topology.yaml
...`): install, status against routes read back, drift repaired, fail/restore pulling and putting back exactly a
link's nexthops while traffic passes, recorded in the state file."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from controller import planning
from controller.state.statefile import load_origins
from controller.model.failures import LinkDown
from controller.southbound.kroutes import Nexthop, intf, link_local, pulled_nexthops, switch_routes
from controller.model.failures import OPERATOR
from tests.paths import REPO


def fabricctl(lab: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO)


def _routes(lab: Any) -> dict[str, list[Any]]:
    return {s.name: lab.routes(s.name) for s in lab.model.switches}


def _status(lab: Any) -> dict[str, Any]:
    out = fabricctl(lab, "status", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["switches"]


IN_SYNC = {"missing": 0, "extra": 0, "differing": 0, "in_sync": True}


def test_install_is_idempotent_and_status_compares_routes_read_back(lab: Any) -> None:
    plan = {s.name: switch_routes(planning.fabric(lab.model, "srv6_spray"), s) for s in lab.model.switches}
    for _ in range(2):
        out = fabricctl(lab, "install")
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == [f"{s.name}: in sync" for s in lab.model.switches] + [
            "install: 8 switches ok, 0 failed"]
        assert _routes(lab) == plan
    assert _status(lab) == {s.name: IN_SYNC for s in lab.model.switches}


def test_status_shows_a_route_removed_by_hand_and_install_repairs_it(lab: Any) -> None:
    leaf = lab.model.switch("p0-t0-0")
    healthy = _routes(lab)
    gone = subprocess.run(["ip", "-n", lab.netns_of(leaf.name), "-6", "route", "del", "fd00:0:1::/64"],
                          capture_output=True, text=True)
    assert gone.returncode == 0, gone.stderr
    assert "fd00:0:1::/64" not in {r.prefix for r in lab.routes(leaf.name)}
    status = _status(lab)
    assert status[leaf.name] == {"missing": 1, "extra": 0, "differing": 0, "in_sync": False}
    assert all(v == IN_SYNC for n, v in status.items() if n != leaf.name)
    text = fabricctl(lab, "status")
    assert text.returncode == 0  # out of sync is not an error
    row = next(line.split() for line in text.stdout.splitlines() if line.startswith(f"{leaf.name} "))
    assert row == [leaf.name, "1", "0", "0", "out", "of", "sync"]
    dry = fabricctl(lab, "install", "--dry-run", leaf.name)
    want = {r.prefix: r for r in healthy[leaf.name]}["fd00:0:1::/64"]
    assert dry.stdout.splitlines()[:2] == [f"{leaf.name}: would write 1 inserts, 0 modifies, 0 deletes",
                                           f"  + {want.text()}"]
    fixed = fabricctl(lab, "install")
    assert fixed.returncode == 0, fixed.stderr
    assert f"{leaf.name}: 1 inserts, 0 modifies, 0 deletes" in fixed.stdout.splitlines()
    assert _routes(lab) == healthy
    assert _status(lab) == {s.name: IN_SYNC for s in lab.model.switches}


def test_fail_link_pulls_exactly_its_nexthops_traffic_passes_restore_puts_them_back(lab: Any) -> None:
    topo = lab.model
    leaf0, leaf1 = topo.switch("p0-t0-0"), topo.switch("p0-t0-1")
    spine1 = topo.switch("p0-t1-1")
    healthy = _routes(lab)
    lab.cut_link("p0-t0-0", "p0-t1-1")
    try:
        out = fabricctl(lab, "fail", "link", "p0-t0-0", "p0-t1-1")
        assert out.returncode == 0, out.stderr
        assert "recorded: fail link p0-t0-0 -- p0-t1-1; 1 failure in" in out.stdout
        assert load_origins(lab.failure_state_path) == {LinkDown("p0-t0-0", "p0-t1-1"): OPERATOR}
        now = _routes(lab)
        up0 = intf(leaf0.uplinks[spine1.index])
        up1 = intf(leaf1.uplinks[spine1.index])
        assert {n: pulled_nexthops(healthy[n], now[n]) for n in now} == {
            "p0-t0-0": {"fd00:0:1::/64": (Nexthop(up0, link_local(spine1.mac), "fcbb:bb00:2:401:fff::"),),
                        "fcbb:bb00:2::/48": (Nexthop(up0, link_local(spine1.mac)),)},
            "p0-t0-1": {"fd00::/64": (Nexthop(up1, link_local(spine1.mac), "fcbb:bb00:2:400:fff::"),)},
            "p0-t1-1": {"fcbb:bb00:400::/48": (Nexthop(intf(spine1.downlinks[leaf0.index]), link_local(leaf0.mac)),)},
            **{s.name: {} for s in topo.switches if s.name not in ("p0-t0-0", "p0-t0-1", "p0-t1-1")}}
        # nothing else changed: every route left has what it had but the pulled nexthops
        assert all({r.prefix for r in now[n]} <= {r.prefix for r in healthy[n]} for n in now)
        assert _status(lab) == {s.name: IN_SYNC for s in topo.switches}
        report = lab.traffic(qps=8, messages=16, rate=0)
        assert report.ok, report.problems()
        assert report.totals()["received"] == report.totals()["sent"] > 0
    finally:
        lab.mend_link("p0-t0-0", "p0-t1-1")
        back = fabricctl(lab, "restore", "link", "p0-t0-0", "p0-t1-1")
    assert back.returncode == 0, back.stderr
    assert "recorded: restore link p0-t0-0 -- p0-t1-1; 0 failures in" in back.stdout
    assert load_origins(lab.failure_state_path) == {}
    assert _routes(lab) == healthy
    report = lab.traffic(qps=4, messages=8, rate=0)
    assert report.ok, report.problems()


def test_a_namespace_that_is_gone_is_a_per_switch_error(lab: Any, tmp_path: Any) -> None:
    """A topology naming a namespace that does not exist: that switch's error, exit 1, the others served."""
    import yaml

    doc = yaml.safe_load(lab.topology_path.read_text())
    for rec in doc["switches"]:
        if rec["name"] == "p1-t1-1":
            rec["netns"] = "sf-gone-p1-t1-1"
    path = tmp_path / "topology.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = subprocess.run([sys.executable, "-m", "fabricctl", "--topology", str(path), "install"],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 1
    assert out.stderr.startswith("error: p1-t1-1: cannot open namespace sf-gone-p1-t1-1: ")
    assert "install: 7 switches ok, 1 failed (p1-t1-1)" in out.stdout
