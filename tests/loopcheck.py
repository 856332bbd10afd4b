"""The loop agents' lab check shared by the bmv2 and kernel tiers: every host's agent (no controller running)
localizes a T1 that stops forwarding as its own leaf's links to it, both ways, and denies exactly the EVs
through it; once the T1 forwards again, nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller import fabricops
from controller.plan.evs import ev_id, host_evs
from endpoint import lab as ep
from mininet_labs.processes import with_repo_path

HOSTS = ("h0", "h1", "h2", "h3")
SPINE = "p0-t1-1"
LEAVES = ("p0-t0-0", "p0-t0-1")


def _states(run_dir: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for h in HOSTS:
        try:
            out[h] = json.loads((run_dir / f"loops-{h}.json").read_text())
        except (OSError, json.JSONDecodeError):
            pass
    return out


def _wait(run_dir: Path, ok: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60.0) -> dict[str, Any]:
    end = time.monotonic() + timeout
    states: dict[str, Any] = {}
    while time.monotonic() < end:
        states = _states(run_dir)
        if len(states) == len(HOSTS) and all(ok(s) for s in states.values()):
            return states
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s; states {states}")


def t1_mapped_out_by_every_host(lab: Any, stop: Callable[[], None], restart: Callable[[], None]) -> dict[str, Any]:
    """Run the check with `stop` making SPINE stop forwarding and `restart` undoing it; the agents' final reports."""
    run_dir = lab.dir / "loops" / str(os.getpid())
    run_dir.mkdir(parents=True)
    evs = ep.export_evs(lab, run_dir / "evs.json")
    fabric = fabricops.fabric(lab.model, "srv6_spray")
    procs: dict[str, subprocess.Popen[Any]] = {}
    env = with_repo_path(os.environ)
    try:
        for h in HOSTS:
            with open(run_dir / f"loops-{h}.err", "w") as err:
                procs[h] = lab.host(h).popen(
                    [sys.executable, "-m", "endpoint", "loops", "--topology", str(lab.topology_path), "--host", h,
                     "--evs", str(evs), "--state", str(run_dir / f"loops-{h}.json"), "--period-ms", "50",
                     "--timeout-ms", "250", "--confirm", "3"], env=env, stdout=subprocess.DEVNULL, stderr=err)
        # every host answers its loops clean first: 2 planes x (nic + 2 spines + 2 cycles) loops each
        clean = _wait(run_dir, lambda s: s["rounds"] >= 10 and s["loops"] == 10 and s["failed"] == [], "clean rounds")
        assert all(s["denied"] == {} for s in clean.values())
        expected = {}
        for h in HOSTS:
            leaf = LEAVES[0] if h in ("h0", "h1") else LEAVES[1]
            through = {d: sorted(e.id for e in es if e.spine_name == SPINE) for d, es in host_evs(fabric, h).items()}
            denied = {d: ids for d, ids in through.items() if ids}
            assert denied == {d: [ev_id(0, 1)] for d in HOSTS if (d in ("h0", "h1")) != (h in ("h0", "h1"))}
            expected[h] = ([{"from": leaf, "to": SPINE, "kind": "t0-t1"}, {"from": SPINE, "to": leaf, "kind": "t1-t0"}],
                           denied)
        stop()
        try:
            _wait(run_dir, lambda s: (s["failed"], s["denied"]) == expected[s["host"]], f"{SPINE} mapped out")
        finally:
            restart()
        _wait(run_dir, lambda s: s["failed"] == [] and s["denied"] == {}, "clean again")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        for p in procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    final = _states(run_dir)
    assert all(s["final"] and s["errors"] == [] for s in final.values()), final
    return final


def figures(final: dict[str, Any]) -> str:
    return json.dumps({h: {k: s[k] for k in ("rounds", "achieved_period_ms", "sent", "lost", "late", "overruns",
                                           "rtt_ms", "round_ms")} for h, s in final.items()})


AGENT_HOST, REMOTE = "h0", "h2"  # the one agent, and a sender on the other leaf


def one_agent_pushed_to_a_remote_host(lab: Any, stop: Callable[[], None], restart: Callable[[], None]) -> dict[str, Any]:
    """Only AGENT_HOST runs a loop agent; REMOTE (the other leaf) runs a sender to it. With SPINE stopped, the
    merged denylist (one reporter) is recorded and pushed: REMOTE's sender reports its EV through SPINE as DENIED
    (`fabricctl endpoint query`) and `fabricctl status` shows the links and who saw them; once SPINE forwards
    and the agent's report is clean, the next push takes the EV back. The pushes' output."""
    from click.testing import CliRunner

    from fabricctl.main import cli

    loops_dir = lab.dir / "loops" / f"{os.getpid()}-push"
    loops_dir.mkdir(parents=True)
    evs = ep.export_evs(lab, loops_dir / "evs.json")
    state = loops_dir / "state.json"
    through = ev_id(0, 1)  # plane 0, spine 1: SPINE
    env = with_repo_path(os.environ)
    report = loops_dir / f"loops-{AGENT_HOST}.json"
    with open(loops_dir / f"loops-{AGENT_HOST}.err", "w") as err:
        agent = lab.host(AGENT_HOST).popen(
            [sys.executable, "-m", "endpoint", "loops", "--topology", str(lab.topology_path), "--host", AGENT_HOST,
             "--evs", str(evs), "--state", str(report), "--period-ms", "50", "--timeout-ms", "250", "--confirm", "3"],
            env=env, stdout=subprocess.DEVNULL, stderr=err)
    sending = ep.start(lab, [(REMOTE, AGENT_HOST)], ep.Workload(messages=100_000, rate=100.0, duration=90.0))
    run = CliRunner().invoke
    outputs: dict[str, Any] = {}

    def agent_report(ok: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        end = time.monotonic() + 60.0
        doc: dict[str, Any] = {}
        while time.monotonic() < end:
            try:
                doc = json.loads(report.read_text())
            except (OSError, json.JSONDecodeError):
                doc = {}
            if doc and ok(doc):
                return doc
            time.sleep(0.1)
        raise AssertionError(f"{what}: not within 60 s; {AGENT_HOST}'s report {doc}")

    def push() -> dict[str, Any]:
        r = run(cli, ["--state", str(state), "endpoint", "denylist", str(loops_dir), "--push", "--run",
                      str(sending.dir), "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    def remote_states() -> dict[int, str]:
        r = run(cli, ["endpoint", "query", REMOTE, "--to", AGENT_HOST, "--run", str(sending.dir), "--json"])
        assert r.exit_code == 0, r.output
        return {e["ev"]: e["state"] for e in json.loads(r.stdout)["evs"]}

    try:
        sock = sending.dir / f"control-{REMOTE}.sock"
        end = time.monotonic() + 30.0
        while not sock.exists():
            assert time.monotonic() < end and sending.senders[REMOTE].poll() is None, f"{REMOTE}'s sender: no {sock}"
            time.sleep(0.1)
        agent_report(lambda s: s["rounds"] >= 10 and s["failed"] == [], "clean rounds")
        links = [{"from": LEAVES[0], "to": SPINE, "kind": "t0-t1"}, {"from": SPINE, "to": LEAVES[0], "kind": "t1-t0"}]
        stop()
        try:
            agent_report(lambda s: s["failed"] == links, f"{SPINE} localized by {AGENT_HOST}")
            outputs["denied"] = doc = push()
            assert [(e["from"], e["to"], e["seen_by"]) for e in doc["links"]] == \
                [(LEAVES[0], SPINE, [AGENT_HOST]), (SPINE, LEAVES[0], [AGENT_HOST])]
            other = "h1"  # AGENT_HOST's neighbour: REMOTE's sender does not send there, nothing to map out
            assert doc["pushed"] == [{"host": REMOTE, "ok": True, "denied": {AGENT_HOST: [through], other: [through]},
                                      "unknown": {}, "requests": 2}]
            states = remote_states()
            assert states[through] == "denied" and [ev for ev, s in states.items() if s == "denied"] == [through], states
            r = run(cli, ["--topology", str(lab.topology_path), "--state", str(state), "status", "--offline", "--json"])
            assert [(e["from"], e["to"], e["kind"], e["seen_by"]) for e in json.loads(r.stdout)["denylist"]] == \
                [(LEAVES[0], SPINE, "t0-t1", [AGENT_HOST]), (SPINE, LEAVES[0], "t1-t0", [AGENT_HOST])]
        finally:
            restart()
        agent_report(lambda s: s["failed"] == [], "clean again")
        outputs["clean"] = doc = push()
        assert doc["links"] == [] and doc["pushed"][0]["unknown"] == {AGENT_HOST: [through], "h1": [through]}
        assert remote_states()[through] != "denied"
    finally:
        sending.kill()
        if agent.poll() is None:
            agent.terminate()
        try:
            agent.wait(timeout=10)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
    return outputs
