"""The lab's fault library (`fabricctl lab fault ...`, mininet_labs/faults.py) on the default lab: each
kind does what it says to the lab's interfaces and processes, is named by `lab status`, undone, cleared
all at once, and what `lab down` runs first leaves nothing frozen or filtering; then each kind against
`fabricctl run`: exactly that failure recorded, traffic passing meanwhile, restored once undone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from controller.model.failures import HostPortDown, LinkDown, SwitchDown
from tests.mininet.controller.service.test_service import (LEAF, ROOT, SPINE, controller, recorded, settled,  # noqa: F401
                                        wait_until)


def fabricctl(lab: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricctl", "lab", *args, "--dir", str(lab.dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def proc_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def carrier(intf: str) -> str | None:
    try:
        return Path(f"/sys/class/net/{intf}/carrier").read_text().strip()
    except OSError:
        return None


def nft_tables() -> str:
    return subprocess.run(["nft", "list", "tables", "netdev"], capture_output=True, text=True).stdout


def host_routes(lab: Any, host: str) -> list[str]:
    """A host's routes (but the kernel's own) and permanent neighbours: what its NIC going down deletes."""
    out = []
    for argv in (["ip", "-6", "route", "show", "table", "all"], ["ip", "-4", "route", "show", "table", "all"],
                 ["ip", "neigh", "show", "nud", "permanent"]):
        out += [line for line in lab.host(host).run(argv).stdout.splitlines() if "proto kernel" not in line]
    return sorted(out)


def test_each_fault_acts_is_named_and_everything_clears(lab: Any):
    from mininet_labs.faults import active, clear_remains
    from mininet_labs.topo import link_ends

    leaf_end, spine_end = link_ends(lab.model, LEAF, SPINE, lab.tag)
    other_leaf_end, _ = link_ends(lab.model, "p0-t0-1", SPINE, lab.tag)
    frozen = lab.status()["switches"]["p1-t1-0"]["pid"]
    tables_before = nft_tables()
    h3_before = host_routes(lab, "h3")
    injected = [("carrier-down", LEAF, SPINE), ("blackhole", SPINE, LEAF), ("gray", "p0-t0-1", SPINE, "20"),
                ("slow", "p1-t0-0", "p1-t1-1", "2000"), ("freeze", "p1-t1-0"), ("host-nic-down", "h3", "1")]
    try:
        for args in injected:
            out = fabricctl(lab, "fault", *args)
            assert out.returncode == 0 and out.stdout.startswith("injected: "), out
        assert carrier(leaf_end.intf) is None and carrier(spine_end.intf) == "0"  # down, and the far end lost carrier
        assert proc_state(frozen) == "T"
        assert set(h3_before) - set(host_routes(lab, "h3"))  # the NIC down took routes and neighbours with it
        assert nft_tables().count("srv6fault_") == tables_before.count("srv6fault_") + 2
        assert "tbf" in subprocess.run(["tc", "qdisc", "show", "dev", link_ends(lab.model, "p1-t0-0", "p1-t1-1",
                                                                                  lab.tag)[0].intf],
                                       capture_output=True, text=True).stdout
        status = json.loads(fabricctl(lab, "status", "--json").stdout)
        assert len(status["faults"]) == len(injected)
        assert f"gray 20% p0-t0-1 -> {SPINE} ({other_leaf_end.intf})" in status["faults"]
        assert f"frozen (SIGSTOP) p1-t1-0 (pid {frozen})" in status["faults"]
        text = fabricctl(lab, "status").stdout
        assert f"  fault: carrier down {LEAF} -> {SPINE} ({leaf_end.intf})" in text
        # bad input: one line, non-zero, nothing changed
        for bad, why in [(("fault", "blackhole", LEAF, "p1-t1-0"), "no link between"),
                         (("fault", "freeze", "nosuch"), "unknown switch 'nosuch'"),
                         (("fault", "carrier-down", LEAF, SPINE), "is active already"),
                         (("fault", "blackhole", LEAF, SPINE, "--undo"), "no blackhole on")]:
            out = fabricctl(lab, *bad)
            assert out.returncode != 0 and why in out.stderr and len(out.stderr.strip().splitlines()) == 1, (bad, out)
        assert len(active(lab.dir)) == len(injected)
        # one undone by hand, the rest cleared at once
        out = fabricctl(lab, "fault", "thaw", "p1-t1-0")
        assert out.returncode == 0 and proc_state(frozen) != "T"
        out = fabricctl(lab, "fault", "clear")
        assert out.returncode == 0 and out.stdout.startswith(f"undone: {len(injected) - 1} faults"), out
        assert carrier(leaf_end.intf) == "1"
        assert host_routes(lab, "h3") == h3_before  # its plane-1 route and gateway neighbours back with the NIC
        assert nft_tables().count("srv6fault_") == tables_before.count("srv6fault_")
        assert json.loads(fabricctl(lab, "status", "--json").stdout)["faults"] == []
        # a flapping port: a process takes it down and up until undone, then leaves it up
        flapping, _ = link_ends(lab.model, "p1-t0-1", "p1-t1-1", lab.tag)
        assert fabricctl(lab, "fault", "flap", "p1-t0-1", "p1-t1-1", "--period-ms", "50").returncode == 0
        (flapper,) = [f.undo["pid"] for f in active(lab.dir) if f.kind == "flap"]
        seen = set()
        end = time.monotonic() + 60  # a bound only: the flapper is a new process, seconds late on a loaded machine
        while not {None, "1"} <= seen and time.monotonic() < end:
            seen.add(carrier(flapping.intf))
            time.sleep(0.01)
        assert {None, "1"} <= seen  # it went down and came up again
        assert fabricctl(lab, "fault", "flap", "p1-t0-1", "p1-t1-1", "--undo").returncode == 0
        assert not Path(f"/proc/{flapper}").exists() or proc_state(flapper) == "Z"
        assert int(Path(f"/sys/class/net/{flapping.intf}/flags").read_text(), 16) & 0x1  # left IFF_UP
        # what `lab down` does first: thaw and unfilter, whatever the record holds
        for args in [("freeze", "p1-t1-0"), ("blackhole", SPINE, LEAF)]:
            assert fabricctl(lab, "fault", *args).returncode == 0
        assert {f.kind for f in clear_remains(lab.dir)} == {"freeze", "blackhole"}
        assert proc_state(frozen) != "T"
        assert nft_tables().count("srv6fault_") == tables_before.count("srv6fault_")
        assert active(lab.dir) == []
    finally:
        clear_remains(lab.dir)
        subprocess.run(["ip", "link", "set", leaf_end.intf, "up"], capture_output=True)
        lab.host_nic("h3", 1, "up")
        subprocess.run(["tc", "qdisc", "del", "dev", link_ends(lab.model, "p1-t0-0", "p1-t1-1", lab.tag)[0].intf,
                        "root"], capture_output=True)


def test_each_fault_against_fabricctl_run_exactly_that_failure_recorded_then_restored(lab: Any, controller):  # noqa: F811
    nic = lab.host("h1").nic(0)
    host_port = lab.model.switch(nic.leaf).host_ports[nic.slot]
    cases = [(("blackhole", LEAF, SPINE), LinkDown(LEAF, SPINE)),
             (("freeze", SPINE), SwitchDown(SPINE)),
             (("carrier-down", SPINE, LEAF), LinkDown(LEAF, SPINE)),
             (("host-nic-down", "h1", "0"), HostPortDown(nic.leaf, host_port))]
    c = controller(10, "events", "--restore-after", "10")
    c.primary_everywhere()
    for args, failure in cases:
        n = len(c.all_events())
        assert fabricctl(lab, "fault", *args).returncode == 0
        try:
            wait_until(settled(lab, frozenset({failure})), f"{args[0]} recorded as {failure} and pulled")
            pairs = [(a, b) for a, b in [("h0", "h2"), ("h2", "h0"), ("h1", "h3"), ("h3", "h1")]
                     if not (isinstance(failure, HostPortDown) and "h1" in (a, b))]
            report = lab.traffic(pairs, qps=4, messages=4, timeout=90)
            assert report.problems() == [], (args, report.problems())
            downs = [e for e in c.all_events()[n:] if e["kind"] in ("link_down", "port_down", "switch_down")]
            assert downs and all(e.get("link") == [LEAF, SPINE] or e.get("switch") == SPINE
                                 or e.get("port") == [nic.leaf, host_port] for e in downs), (args, downs)
        finally:
            fabricctl(lab, "fault", *args, "--undo")
        wait_until(settled(lab, frozenset()), f"restored after undoing {args[0]}")
