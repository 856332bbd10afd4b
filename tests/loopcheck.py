"""The loop agents' lab check shared by the bmv2 and kernel tiers: every host's agent (no controller running)
localizes a T1 that stops forwarding as its own leaf's links to it, both ways, and denies exactly the EVs
through it; once the T1 forwards again, nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller import planning
from controller.plan.evs import ev_id, host_evs
from endpoint import lab as ep
from mininet_labs.processes import stop_all, with_repo_path

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
    fabric = planning.fabric(lab.model, "srv6_spray")
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
        stop_all(procs.values())
    final = _states(run_dir)
    assert all(s["final"] and s["errors"] == [] for s in final.values()), final
    return final


def figures(final: dict[str, Any]) -> str:
    return json.dumps({h: {k: s[k] for k in ("rounds", "achieved_period_ms", "sent", "lost", "late", "overruns",
                                           "rtt_ms", "round_ms")} for h, s in final.items()})


AGENT_HOST, REMOTE = "h0", "h2"  # the one agent, and a sender on the other leaf
THROUGH = ev_id(0, 1)  # plane 0, spine 1: SPINE's EV
LINKS = [{"from": LEAVES[0], "to": SPINE, "kind": "t0-t1"}, {"from": SPINE, "to": LEAVES[0], "kind": "t1-t0"}]


class OneAgent:
    """AGENT_HOST's loop agent reporting into `loops_dir` (with the EV export there), and REMOTE's sender to it."""

    def __init__(self, lab: Any, loops_dir: Path) -> None:
        loops_dir.mkdir(parents=True)
        self.lab, self.loops_dir = lab, loops_dir
        evs = ep.export_evs(lab, loops_dir / "evs.json")
        self.report = loops_dir / f"loops-{AGENT_HOST}.json"
        with open(loops_dir / f"loops-{AGENT_HOST}.err", "w") as err:
            self.agent = lab.host(AGENT_HOST).popen(
                [sys.executable, "-m", "endpoint", "loops", "--topology", str(lab.topology_path), "--host", AGENT_HOST,
                 "--evs", str(evs), "--state", str(self.report), "--period-ms", "50", "--timeout-ms", "250",
                 "--confirm", "3"], env=with_repo_path(os.environ), stdout=subprocess.DEVNULL, stderr=err)
        self.sending = ep.start(lab, [(REMOTE, AGENT_HOST)], ep.Workload(messages=100_000, rate=100.0, duration=90.0))

    def wait_sender(self) -> None:
        sock = self.sending.dir / f"control-{REMOTE}.sock"
        end = time.monotonic() + 30.0
        while not sock.exists():
            assert time.monotonic() < end and self.sending.senders[REMOTE].poll() is None, f"{REMOTE}'s sender: no {sock}"
            time.sleep(0.1)

    def agent_report(self, ok: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        end = time.monotonic() + 60.0
        doc: dict[str, Any] = {}
        while time.monotonic() < end:
            try:
                doc = json.loads(self.report.read_text())
            except (OSError, json.JSONDecodeError):
                doc = {}
            if doc and ok(doc):
                return doc
            time.sleep(0.1)
        raise AssertionError(f"{what}: not within 60 s; {AGENT_HOST}'s report {doc}")

    def remote_states(self) -> dict[int, str]:
        """REMOTE's sender's EV states towards AGENT_HOST (`fabricctl endpoint query`)."""
        from click.testing import CliRunner

        from fabricctl.main import cli

        r = CliRunner().invoke(cli, ["endpoint", "query", REMOTE, "--to", AGENT_HOST, "--run", str(self.sending.dir),
                                     "--json"])
        assert r.exit_code == 0, r.output
        return {e["ev"]: e["state"] for e in json.loads(r.stdout)["evs"]}

    def close(self) -> None:
        self.sending.kill()
        if self.agent.poll() is None:
            self.agent.terminate()
        try:
            self.agent.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.agent.kill()
            self.agent.wait()


def one_agent_pushed_to_a_remote_host(lab: Any, stop: Callable[[], None], restart: Callable[[], None]) -> dict[str, Any]:
    """Only AGENT_HOST runs a loop agent; REMOTE (the other leaf) runs a sender to it. With SPINE stopped, the
    merged denylist (one reporter) is recorded and pushed: REMOTE's sender reports its EV through SPINE as DENIED
    (`fabricctl endpoint query`) and `fabricctl status` shows the links and who saw them; once SPINE forwards
    and the agent's report is clean, the next push takes the EV back. The pushes' output."""
    from click.testing import CliRunner

    from fabricctl.main import cli

    one = OneAgent(lab, lab.dir / "loops" / f"{os.getpid()}-push")
    state = one.loops_dir / "state.json"
    run = CliRunner().invoke
    outputs: dict[str, Any] = {}

    def push() -> dict[str, Any]:
        r = run(cli, ["--state", str(state), "endpoint", "denylist", str(one.loops_dir), "--push", "--run",
                      str(one.sending.dir), "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    try:
        one.wait_sender()
        one.agent_report(lambda s: s["rounds"] >= 10 and s["failed"] == [], "clean rounds")
        stop()
        try:
            one.agent_report(lambda s: s["failed"] == LINKS, f"{SPINE} localized by {AGENT_HOST}")
            outputs["denied"] = doc = push()
            assert [(e["from"], e["to"], e["seen_by"]) for e in doc["links"]] == \
                [(LEAVES[0], SPINE, [AGENT_HOST]), (SPINE, LEAVES[0], [AGENT_HOST])]
            other = "h1"  # AGENT_HOST's neighbour: REMOTE's sender does not send there, nothing to map out
            assert doc["pushed"] == [{"host": REMOTE, "ok": True, "denied": {AGENT_HOST: [THROUGH], other: [THROUGH]},
                                      "unknown": {}, "requests": 2}]
            states = one.remote_states()
            assert states[THROUGH] == "denied" and [ev for ev, s in states.items() if s == "denied"] == [THROUGH], states
            r = run(cli, ["--topology", str(lab.topology_path), "--state", str(state), "status", "--offline", "--json"])
            assert [(e["from"], e["to"], e["kind"], e["seen_by"]) for e in json.loads(r.stdout)["denylist"]] == \
                [(LEAVES[0], SPINE, "t0-t1", [AGENT_HOST]), (SPINE, LEAVES[0], "t1-t0", [AGENT_HOST])]
        finally:
            restart()
        one.agent_report(lambda s: s["failed"] == [], "clean again")
        outputs["clean"] = doc = push()
        assert doc["links"] == [] and doc["pushed"][0]["unknown"] == {AGENT_HOST: [THROUGH], "h1": [THROUGH]}
        assert one.remote_states()[THROUGH] != "denied"
    finally:
        one.close()
    return outputs


def _events(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError):
        return []


def _until(what: str, ok: Callable[[], Any], limit: float = 60.0, said: Callable[[], Any] = lambda: "") -> Any:
    """`ok`'s first true answer (a deadline for a hung controller, not a timing claim)."""
    end = time.monotonic() + limit
    while not (got := ok()):
        assert time.monotonic() < end, f"not within {limit} s: {what} {said()}"
        time.sleep(0.1)
    return got


def one_agent_under_run_reaches_a_remote_host(lab: Any, stop: Callable[[], None], restart: Callable[[], None]
                                              ) -> dict[str, Any]:
    """Only AGENT_HOST runs a loop agent; REMOTE (the other leaf) runs a sender to it; `fabricctl run --endpoints
    LAB --loops DIR` runs, and no `fabricctl endpoint denylist`. With SPINE stopped, the controller records the
    agent's report and REMOTE's sender has its EV through SPINE DENIED; `fabricctl status` says REMOTE was told;
    once SPINE forwards and the report is clean, the EV is taken back. The controller's denylist events and two
    figures: from the record's change to the push (event times), and from SPINE's stop to the DENIED state read."""
    from tests.paths import REPO

    one = OneAgent(lab, lab.dir / "loops" / f"{os.getpid()}-run")
    state = one.loops_dir / "state.json"
    events = one.loops_dir / "fabric-events.jsonl"
    denylist = lambda: [e for e in _events(events) if e["kind"].startswith("denylist")]  # noqa: E731
    pushed = lambda links: [e for e in denylist() if e["kind"] == "denylist_pushed" and e["links"] == links]  # noqa: E731
    both = [f"{LEAVES[0]}->{SPINE}", f"{SPINE}->{LEAVES[0]}"]
    run: subprocess.Popen[str] | None = None
    try:
        one.wait_sender()
        one.agent_report(lambda s: s["rounds"] >= 10 and s["failed"] == [], "clean rounds")
        run = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(lab.topology_path), "--state",
                                str(state), "run", "--duration", "150", "--endpoints", str(lab.dir), "--loops",
                                str(one.loops_dir)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = _until("the leader's first push (the empty list)", lambda: pushed([]), said=denylist)
        assert first[0]["told"] == [REMOTE] and first[0]["endpoints"] == str(lab.dir)
        assert one.remote_states()[THROUGH] != "denied"
        stopped = time.monotonic()
        stop()
        try:
            _until(f"{REMOTE}'s EV through {SPINE} DENIED", lambda: one.remote_states()[THROUGH] == "denied",
                   said=lambda: (one.remote_states(), denylist()))
            seen_denied = time.monotonic() - stopped
            states = one.remote_states()
            assert [ev for ev, s in states.items() if s == "denied"] == [THROUGH], states
            # the record's change that added the stopped spine's link; a report of a starved switch's lost loops
            # before the stop may come and go first
            recorded = [e for e in denylist() if e["kind"] == "denylist_recorded"]
            ours = [e for e in recorded if set(both) <= set(e["added"])]
            assert ours and ours[0]["t"] >= first[0]["t"], recorded
            out = _until("the controller's event of the list pushed", lambda: pushed(both), said=denylist)[0]
            assert out["told"] == [REMOTE] and out["not_told"] == [], out
            record_to_push = out["t"] - ours[0]["t"]

            def status_lines() -> list[str]:
                from click.testing import CliRunner

                from fabricctl.main import cli

                r = CliRunner().invoke(cli, ["--topology", str(lab.topology_path), "--state", str(state), "status",
                                             "--offline"])
                return [ln for ln in r.output.splitlines() if "denylist" in ln or "denied link" in ln]
            told = f"  denylist {REMOTE}: told: denied {AGENT_HOST}: {THROUGH:#06x}; h1: {THROUGH:#06x}"
            lines = _until("fabricctl status showing the push", lambda: (ls := status_lines()) and told in ls and ls,
                           said=status_lines)
            assert f"  denylist to endpoints in {lab.dir}: 2 link(s) ({', '.join(both)})" in lines, lines
            assert any(ln.startswith(f"  denied link: {LEAVES[0]} -> {SPINE} (t0-t1): seen by {AGENT_HOST} since")
                       for ln in lines), lines
        finally:
            restart()
        one.agent_report(lambda s: s["failed"] == [], "clean again")
        _until(f"{REMOTE}'s EV through {SPINE} taken back", lambda: one.remote_states()[THROUGH] != "denied",
               said=denylist)
        # the sender takes the list before the pusher writes its event: wait for the event, then judge it
        back = _until("the controller's event of the clean list pushed", lambda: len(pushed([])) >= 2 and pushed([]),
                      said=denylist)
        assert len(back) == 2 and back[1]["told"] == [REMOTE], back
    finally:
        if run is not None:
            run.send_signal(signal.SIGTERM)
            out, err = run.communicate(timeout=30)
            assert run.returncode == 0, err
        one.close()
    return {"events": [(e["kind"], e.get("links"), e.get("told")) for e in denylist()],
            "recorded_to_pushed_ms": round(record_to_push * 1000, 1), "stop_to_denied_seen_s": round(seen_denied, 2)}
