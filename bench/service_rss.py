"""Resident memory of `fabricctl run` over a long run (root, Mininet, bmv2; prints JSON): the controller
runs as its own process at the default probe rate on the default lab, healthy, and its VmRSS is read
from /proc every --every seconds. A service must not grow: the aim is last/first within 10 %.

    P4_TOOLCHAIN_BIN=/opt/p4-toolchain/bin flock /tmp/srv6-heavy.lock .venv/bin/python bench/service_rss.py

Each sample also says how many links the controller had declared down so far (its events file):
RSS that steps up with bursts of link changes is the controller's work, not a steady leak.
`--trace FILE` runs the controller under tracemalloc (bench/_traced_run.py) and writes, at each
sample, the Python allocation sites that grew most since the first: a diagnosis, not the figure
(tracing costs CPU and memory of its own).

Not a test: it takes --minutes (default 10) plus the lab's start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.state.statefile import save_state  # noqa: E402
from controller.service.status import read_status  # noqa: E402
from mininet_labs.lab import Lab  # noqa: E402
from mininet_labs.labstate import default_topology, prerequisites


def proc_kb(pid: int, field: str = "VmRSS") -> int | None:
    """A /proc/PID/status memory field in kB; None once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_base(count: int) -> int:
    """A gRPC base port with `count` free ports (and their thrift ports), per process like the tests' labs."""
    from mininet_labs.switch import free_port_base

    return free_port_base(count)


def wait_primary(state: Path, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> dict | None:
    """The controller's status once it is primary on every switch (None if it never was in time)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        view = read_status(state)
        if view is not None and view.get("primary"):
            return view
        time.sleep(0.2)
    return None


class EventCounts:
    """Counts of the events file's kinds, read on as it grows."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.counts = path, 0, {}  # type: ignore[var-annotated]

    def update(self) -> dict[str, int]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return self.counts
        whole = chunk[:chunk.rfind(b"\n") + 1]
        self.offset += len(whole)
        for line in whole.splitlines():
            try:
                kind = json.loads(line)["kind"]
            except (ValueError, KeyError):
                continue
            self.counts[kind] = self.counts.get(kind, 0) + 1
        return self.counts


def measure(lab: Lab, minutes: float, every: float, election_id: int, extra: list[str], trace: Path | None = None) -> dict:
    save_state(lab.failure_state_path, [])
    events = lab.dir / "rss-events.jsonl"
    head = [sys.executable, "-m", "fabricctl"] if trace is None else [sys.executable, str(ROOT / "bench" / "_traced_run.py"),
                                                                           str(trace), str(every)]
    argv = [*head, "--topology", str(lab.topology_path), "--election-id", str(election_id), "run", "--events", str(events),
            *extra]
    log = open(lab.dir / "rss-run.log", "w")
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        view0 = wait_primary(lab.failure_state_path, proc)
        if view0 is None:
            log.flush()
            return {"error": "the controller was not primary within 60 s",
                    "log": (lab.dir / "rss-run.log").read_text()[-800:]}
        time.sleep(every)  # settle: imports done, first probe rounds and counter reads behind it
        samples: list[dict] = []
        counts = EventCounts(events)
        t0, c0 = time.monotonic(), cpu_s(proc.pid)
        while True:
            rss = proc_kb(proc.pid)
            if rss is None:
                break
            seen = counts.update()
            samples.append({"t_s": round(time.monotonic() - t0, 1), "rss_kb": rss,
                            "threads": proc_kb(proc.pid, "Threads"), "link_downs": seen.get("link_down", 0),
                            "deltas_written": seen.get("deltas_written", 0), "reconciled": seen.get("reconciled", 0)})
            if time.monotonic() - t0 >= minutes * 60:
                break
            time.sleep(every)
        dt, c1 = time.monotonic() - t0, cpu_s(proc.pid)
        view = read_status(lab.failure_state_path) or {}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    rss = [s["rss_kb"] for s in samples]
    kinds = counts.update()
    downs = kinds.get("link_down", 0)
    first, last = rss[0], rss[-1]
    return {"seconds": round(dt, 1), "samples": len(rss), "every_s": every,
            "rss_kb": {"first": first, "last": last, "max": max(rss), "min": min(rss),
                       "median": statistics.median(rss), "growth_ratio": round(last / first, 4),
                       "max_over_first": round(max(rss) / first, 4)},
            "aim_flat_within_10pct": abs(last / first - 1) <= 0.10,
            "controller_cpu_pct": round(100 * (c1 - c0) / dt, 1),
            "probes": view.get("probes"), "false_link_downs": downs, "events": dict(sorted(kinds.items())),
            "exit_code": proc.returncode,
            "series": samples}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between RSS samples")
    ap.add_argument("--grpc-base-port", type=int, default=0, help="first switch's gRPC port (0: a free range)")
    ap.add_argument("--trace", type=Path, metavar="FILE", help="run the controller under tracemalloc; its growth to FILE")
    ap.add_argument("run_args", nargs="*", help="extra 'fabricctl run' options after -- (default: none, the defaults)")
    args = ap.parse_args()
    why = prerequisites()
    if why:
        print(json.dumps({"error": why}))
        return 2
    with tempfile.TemporaryDirectory(prefix="service-rss-") as d, \
            Lab(default_topology(grpc_base_port=args.grpc_base_port or free_base(8)), d, tag=f"rs{os.getpid() % 100}") as lab:
        row = measure(lab, args.minutes, args.every, 10, args.run_args, args.trace)
    print(json.dumps({"bench": "service_rss", "lab": "default (8 switches, 8 links, 16 directions)",
                      "run_args": args.run_args or "defaults (20 ms probes, 80 ms timeout, counters every 5 s)",
                      **row, "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg()}}, indent=1))
    return 0 if "error" not in row else 1


if __name__ == "__main__":
    sys.exit(main())
