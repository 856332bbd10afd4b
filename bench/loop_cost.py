"""What the hosts' loop agents cost at each period, on the kernel lab (root; prints JSON): every host's agent
(`python3 -m endpoint loops`, endpoint/loopprobe.py) beside paced endpoint traffic, against the same traffic
with no agent, the periods taking turns run after run.

    flock /tmp/srv6-lab.lock timeout -s INT 480 .venv/bin/python bench/loop_cost.py --periods none,100,20,5,1 \\
        --runs 3 --out loops.json

The lab: the default 2 planes x 2 T1 x 2 T0 x 2 hosts in endpoint mode (10 loops per host and round: per plane
the NIC loop, one per spine, and the two cycles); h0 <-> h2 and h1 <-> h3 send --rate packets/s each (host EV
spraying, 4 QPs). Per run, seconds after the senders' common start:
  [1.0, 3.5)  healthy: the agents' CPU (utime + stime from /proc, per agent and summed), loops sent per second
              and the achieved period, the traffic delivered per second (all receivers), the senders' and
              receivers' CPU; loops lost or late meanwhile, and links reported with nothing failed (false);
  3.5         p0-t1-1 stops forwarding (its namespace drops every IPv6 packet at prerouting, links and carriers
              up): detection = from the drop in place (the rule committed by an `nft -f -` started
              beforehand; fault_took_ms, from the rule given to nft to nft done, bounds how much earlier the
              drop began) to each agent's first change reporting a failed link (the changes' monotonic_s);
  4.5         it forwards again: cleared = from the table's deletion given to nft to each agent's change back
              to no failed link.
A loop not back within the timeout (max(2 x period, 5 ms) unless --timeout-ms) is lost; a link is reported after
--confirm rounds in a row. Not a test: Python agents and senders on two shared cores; the load is given per run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import spread  # noqa: E402

PAIRS = [("h0", "h2"), ("h1", "h3"), ("h2", "h0"), ("h3", "h1")]
HOSTS = ("h0", "h1", "h2", "h3")
SPINE = "p0-t1-1"
TABLE = "lc_stop"
HEALTHY = (1.0, 3.5)  # the healthy window, s after the senders' start
FAULT_AT, REPAIR_AT, SECONDS = 3.5, 4.5, 6.0
START_DELAY = 2.0  # the senders start this long after they are launched: the agents are up by then


# --- the pure parts ---------------------------------------------------------------------------------------

def parse_periods(text: str) -> list[float | None]:
    """'none,100,20' -> [None, 100.0, 20.0] (None: no agent); ValueError for a period not above 0."""
    out: list[float | None] = []
    for p in (x.strip() for x in text.split(",") if x.strip()):
        if p == "none":
            out.append(None)
            continue
        v = float(p)
        if not v > 0:
            raise ValueError(f"a period must be above 0 ms, not {p}")
        out.append(v)
    if not out:
        raise ValueError("no period given")
    return out


def timeout_ms(period_ms: float, given: float | None = None) -> float:
    """The agents' loop timeout: the given one, else twice the period and at least 5 ms."""
    return given if given else max(2 * period_ms, 5.0)


def cpu_seconds(stat: str, ticks: int) -> float:
    """utime + stime of /proc/PID/stat's text (fields 14 and 15, counted after the parenthesized name)."""
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / ticks


def delivered_pps(bins: list[dict[str, int]], started_ns: int, bin_ms: float, a: float, b: float) -> float | None:
    """Packets per second the receivers' bins (absolute bin index -> packets) hold in [a, b) s after the start."""
    per = int(bin_ms * 1e6)
    total: dict[int, int] = {}
    for r in bins:
        for k, n in r.items():
            rel = int(k) - started_ns // per
            total[rel] = total.get(rel, 0) + n
    lo, hi = int(a * 1000 / bin_ms), int(b * 1000 / bin_ms)
    return round(sum(total.get(i, 0) for i in range(lo, hi)) / ((hi - lo) * bin_ms / 1000), 1) if hi > lo else None


def detection(changes: list[tuple[float, dict[str, Any]]], fault: float, repair: float) -> dict[str, Any]:
    """From an agent's changes (monotonic time, change): ms from `fault` to its first report of a failed link, what it
    reported then, ms from `repair` to its first report of none after that, and the reports before the fault."""
    false = [e for t, e in changes if t < fault and e["failed"]]
    seen = next(((t, e) for t, e in changes if t >= fault and e["failed"]), None)
    clear = next((t for t, e in changes if t >= repair and not e["failed"] and seen and t >= seen[0]), None)
    return {"detected_ms": round((seen[0] - fault) * 1e3, 1) if seen else None,
            "reported": seen[1]["failed"] if seen else None,
            "cleared_ms": round((clear - repair) * 1e3, 1) if clear is not None else None, "false_reports": len(false)}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A period's figures over its runs: median (min-max) of each."""
    def col(key: str) -> list[Any]:
        return [r.get(key) for r in runs]

    det = [d for r in runs for d in r.get("detected_ms", {}).values()]
    clr = [d for r in runs for d in r.get("cleared_ms", {}).values()]
    return {"n": len(runs), "delivered_pps": spread(col("delivered_pps")),
            "agents_cpu_pct": spread(col("agents_cpu_pct")), "agent_cpu_pct_max": spread(col("agent_cpu_pct_max")),
            "traffic_cpu_pct": spread(col("traffic_cpu_pct")), "loops_per_s": spread(col("loops_per_s")),
            "achieved_period_ms": spread(col("achieved_period_ms"), 2), "late_rounds_pct": spread(col("late_rounds_pct")),
            "healthy_lost": spread(col("healthy_lost"), 0), "false_reports": sum(r.get("false_reports", 0) for r in runs),
            "detected_ms": spread(det), "detected_by": [len(r.get("detected_ms", {})) for r in runs],
            "cleared_ms": spread(clr), "fault_took_ms": spread(col("fault_took_ms")),
            "repair_took_ms": spread(col("repair_took_ms")), "load1": [r.get("load1") for r in runs]}


# --- the lab parts ---------------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="loop_cost.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--periods", default="none,100,20,5,1", help="ms, comma-separated; none: no agent")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=400.0, help="packets/s per sender")
    ap.add_argument("--timeout-ms", type=float, help="the loops' timeout (default: max(2 x period, 5))")
    ap.add_argument("--confirm", type=int, default=2)
    ap.add_argument("--dir", default="/tmp/srv6-bench-loops")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args(argv)
    try:
        args.periods = parse_periods(args.periods)
    except ValueError as e:
        ap.error(str(e))
    if args.runs < 1 or args.rate <= 0 or args.confirm < 1:
        ap.error("--runs and --confirm must be at least 1, --rate above 0")
    return args


def _nft(lab: Any, *args: str, check: bool = True) -> None:
    from mininet_labs.kernel.netns import exec_argv

    subprocess.run(exec_argv(str(lab.netns_of(SPINE)), ["nft", *args]), check=check, capture_output=True, timeout=30)


def armed_nft(lab: Any) -> subprocess.Popen[bytes]:
    """`nft -f -` started in the spine's namespace and waiting for its stdin: a command given to it takes effect
    within the time nft needs to read and commit it, not the ~20-60 ms `ip netns exec nft` needs to start."""
    from mininet_labs.kernel.netns import exec_argv

    return subprocess.Popen(exec_argv(str(lab.netns_of(SPINE)), ["nft", "-f", "-"]), stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def commit(proc: subprocess.Popen[bytes], command: str) -> float:
    """Give the armed nft its one command and wait for it; the monotonic time it was given."""
    began = time.monotonic()
    _, err = proc.communicate(command.encode() + b"\n", timeout=30)  # stdin closed after it: nft reads to its end
    if proc.returncode:
        raise RuntimeError(f"nft {command}: {err.decode().strip()}")
    return began


def stop_spine(lab: Any) -> subprocess.Popen[bytes]:
    """The spine's table and prerouting chain, empty (nothing dropped yet), and an armed nft to add the drop."""
    _nft(lab, "add", "table", "ip6", TABLE)
    _nft(lab, "add", "chain", "ip6", TABLE, "pre", "{ type filter hook prerouting priority -300; }")
    return armed_nft(lab)


def restart_spine(lab: Any) -> None:
    _nft(lab, "delete", "table", "ip6", TABLE, check=False)


def _cpu(pids: list[int]) -> dict[int, float]:
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for p in pids:
        try:
            out[p] = cpu_seconds(Path(f"/proc/{p}/stat").read_text(), ticks)
        except (OSError, ValueError, IndexError):
            pass
    return out


def _at(base_ns: int, s: float) -> None:
    left = base_ns / 1e9 + s - time.monotonic()
    if left > 0:
        time.sleep(left)


def _state(path: Path) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
        return doc
    except (OSError, ValueError):
        return {}


def one_run(lab: Any, period: float | None, args: argparse.Namespace) -> dict[str, Any]:
    from endpoint import lab as ep
    from mininet_labs.processes import stop_all, with_repo_path

    load1 = round(os.getloadavg()[0], 2)
    messages = int(SECONDS * args.rate / 4) // 4 * 4
    work = ep.Workload(messages=messages, per_message=4, rate=args.rate, duration=SECONDS * 3 + 5)
    run = ep.start(lab, PAIRS, work, start_delay=START_DELAY)
    agents: dict[str, subprocess.Popen[Any]] = {}
    faulted = False
    armed: subprocess.Popen[bytes] | None = None
    out: dict[str, Any] = {"period_ms": period, "load1": load1}
    try:
        if period is not None:
            tmo = timeout_ms(period, args.timeout_ms)
            out["timeout_ms"] = tmo
            for h in HOSTS:
                with open(run.dir / f"loops-{h}.err", "w") as err:
                    agents[h] = lab.host(h).popen(
                        [sys.executable, "-m", "endpoint", "loops", "--topology", str(lab.topology_path), "--host", h,
                         "--evs", str(run.dir / "evs.json"), "--state", str(run.dir / f"loops-{h}.json"),
                         "--events", str(run.dir / f"loops-{h}.jsonl"), "--control", str(run.dir / f"control-{h}.sock"),
                         "--period-ms", str(period), "--timeout-ms", str(tmo), "--confirm", str(args.confirm)],
                        env=with_repo_path(os.environ), stdout=subprocess.DEVNULL, stderr=err)
        base = run.started_ns
        traffic = [p.pid for p in (*run.senders.values(), *run.receivers.values())]
        mine = {h: p.pid for h, p in agents.items()}
        _at(base, HEALTHY[0])
        c0, w0 = _cpu([*mine.values(), *traffic]), time.monotonic()
        _at(base, HEALTHY[1])
        c1, w1 = _cpu([*mine.values(), *traffic]), time.monotonic()
        healthy = {h: _state(run.dir / f"loops-{h}.json") for h in agents}
        span = w1 - w0
        per_agent = {h: round((c1[p] - c0[p]) / span * 100, 1) for h, p in mine.items() if p in c0 and p in c1}
        out["agent_cpu_pct"] = per_agent
        if per_agent:
            out["agents_cpu_pct"] = round(sum(per_agent.values()), 1)
            out["agent_cpu_pct_max"] = max(per_agent.values())
        out["traffic_cpu_pct"] = round(sum(c1[p] - c0.get(p, c1[p]) for p in traffic if p in c1) / span * 100, 1)
        if period is not None:
            faulted = True
            armed = stop_spine(lab)
            _at(base, FAULT_AT)
            began = commit(armed, f"add rule ip6 {TABLE} pre drop")
            out["fault_s"], out["fault_took_ms"] = time.monotonic(), round((time.monotonic() - began) * 1e3, 1)
            armed = armed_nft(lab)
            _at(base, REPAIR_AT)
            out["repair_s"] = commit(armed, f"delete table ip6 {TABLE}")
            faulted = False
            out["repair_took_ms"] = round((time.monotonic() - out["repair_s"]) * 1e3, 1)
        report = run.wait()
    finally:
        if faulted:
            if armed is not None and armed.poll() is None:
                armed.kill()
                armed.wait()
            restart_spine(lab)
        stop_all(agents.values())  # SIGTERM: each agent writes its final report
        run.kill()
    out["delivered_pps"] = delivered_pps([r["bins"] for r in report.receivers.values()], report.started_ns,
                                         work.bin_ms, *HEALTHY)
    out["offered_pps"] = args.rate * len(PAIRS)
    if agents:
        out.update(agent_figures(run.dir, healthy, out["fault_s"], out["repair_s"]))
    return out


def agent_figures(run_dir: Path, healthy: dict[str, dict[str, Any]], fault: float, repair: float) -> dict[str, Any]:
    """The agents' healthy figures (their state files just before the fault) and detection (their events)."""
    loops_s, periods, late, lost, det, clr, false = 0.0, [], [], 0, {}, {}, 0
    final = {}
    for h, s in healthy.items():
        if s.get("rounds") and s.get("achieved_period_ms"):
            loops_s += s["sent"] / s["rounds"] / (s["achieved_period_ms"] / 1e3)
            periods.append(s["achieved_period_ms"])
            late.append(100 * s["overruns"] / s["rounds"])
            lost += s["lost"]
        ev_path = run_dir / f"loops-{h}.jsonl"
        try:
            events = [json.loads(x) for x in ev_path.read_text().splitlines() if x.strip()]
            d = detection([(e["monotonic_s"], e) for e in events], fault, repair)
        except (OSError, ValueError, KeyError):
            d = {"detected_ms": None, "cleared_ms": None, "reported": None, "false_reports": 0}
        if d["detected_ms"] is not None:
            det[h] = d["detected_ms"]
        if d["cleared_ms"] is not None:
            clr[h] = d["cleared_ms"]
        false += d["false_reports"]
        f = _state(run_dir / f"loops-{h}.json")
        final[h] = {k: f.get(k) for k in ("rounds", "achieved_period_ms", "sent", "lost", "late", "overruns", "rtt_ms",
                                          "round_ms", "errors")} | {"reported": d["reported"]}
    return {"loops_per_s": round(loops_s, 1), "achieved_period_ms": max(periods) if periods else None,
            "late_rounds_pct": round(max(late), 1) if late else None, "healthy_lost": lost, "detected_ms": det,
            "cleared_ms": clr, "false_reports": false, "agents": final}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from endpoint.lab import enable
    from mininet_labs.backends import nodes_for
    from mininet_labs.lab import Lab
    from mininet_labs.labstate import default_topology

    model = replace(default_topology(grpc_base_port=52801), host_source_routing=True)
    lab = Lab(model, args.dir, nodes_for("kernel", name=f"lc{os.getpid() % 1000}"))
    doc: dict[str, Any] = {"bench": "loop_cost", "argv": sys.argv[1:], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                       "load1_start": round(os.getloadavg()[0], 2)},
                           "lab": "kernel, 2 planes x 2 T1 x 2 T0 x 2 hosts; h0<->h2, h1<->h3, 4 QPs each",
                           "rate_pps_per_sender": args.rate, "runs": args.runs, "confirm": args.confirm, "periods": {}}
    t0 = time.monotonic()
    runs: dict[str, list[dict[str, Any]]] = {("none" if p is None else f"{p:g}"): [] for p in args.periods}
    lab.up()
    try:
        enable(lab)
        for i in range(args.runs):
            for p in args.periods:
                key = "none" if p is None else f"{p:g}"
                r = one_run(lab, p, args)
                runs[key].append(r)
                print(f"# run {i + 1} period {key}: delivered {r.get('delivered_pps')} pps, agents CPU "
                      f"{r.get('agents_cpu_pct')} %, loops/s {r.get('loops_per_s')}, achieved {r.get('achieved_period_ms')} ms, "
                      f"detected {r.get('detected_ms')}, load {r['load1']}", file=sys.stderr, flush=True)
    finally:
        lab.down()
    doc["periods"] = {k: {"summary": summarize(rs), "runs": rs} for k, rs in runs.items()}
    doc["seconds"] = round(time.monotonic() - t0, 1)
    doc["machine"]["load1_end"] = round(os.getloadavg()[0], 2)
    text = json.dumps(doc, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
