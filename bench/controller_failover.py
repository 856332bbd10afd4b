"""Leader killed -> new leader primary on every switch: `fabricctl run --store etcd://` (three
controllers, a real three-member etcd cluster) against the file backend's hot backup (two controllers
with static election ids 10 and 5), on the same bmv2 switches in the same process.

Per run: start the controllers, wait until one is primary on every switch with the plan installed,
SIGKILL it, and read the survivors' event files (their monotonic clock is this process's): when the
new leader started its service (etcd: after winning) and when the last switch named it primary.
Prints one JSON document: per-run figures, medians, the aim (<= lease TTL + 1 s) and ratios against
the file backend's median. Needs root, simple_switch_grpc and etcd. Not a test: nothing here asserts
a time. Run it under the lab lock:

    flock /tmp/srv6-lab.lock python3 bench/controller_failover.py [--runs 3] [--lease-ttl 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from controller.model import topology  # noqa: E402
from controller.state.etcdstore import ROOT, EtcdStore, b64, range_end  # noqa: E402
from controller.state.store import parse_url  # noqa: E402
from tests.bmv2.fabric_fixture import start_lab  # noqa: E402
from tests.etcd.cluster import EtcdCluster  # noqa: E402


def events(path: Path) -> list[dict[str, Any]]:
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def primary_everywhere(path: Path, names: set[str], after_ns: int = 0) -> int | None:
    """The mono_ns at which the last of `names` named this controller primary (after after_ns), or None."""
    last: dict[str, int] = {}
    for e in events(path):
        if e["mono_ns"] > after_ns and e["kind"] == "mastership" and e.get("role") == "primary":
            last.setdefault(e["switch"], e["mono_ns"])
    return max(last.values()) if set(last) >= names else None


def primary_now(path: Path, names: set[str]) -> bool:
    """Whether this controller's last mastership event on every switch says primary."""
    last: dict[str, str] = {}
    for e in events(path):
        if e["kind"] == "mastership":
            last[e["switch"]] = e.get("role", "")
    return set(last) >= names and all(last[n] == "primary" for n in names)


def start(argv: list[str], events_path: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from fabricctl.main import main; main()", *argv,
                             "--events", str(events_path)], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=open(log, "w"))


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def wait(condition, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = condition()
        if got:
            return got
        time.sleep(0.02)
    raise RuntimeError(f"not within {timeout} s")


def one_run(lab: Any, work: Path, common: list[str], backend: str, url: str, ttl: int) -> dict[str, Any]:
    names = set(lab.names)
    lab.wipe()
    work.mkdir(parents=True)
    run = ["run", "--no-probe", "--counters-every", "0", "--nice", "0"]
    if backend == "etcd":
        ids = [None, None, None]
        argvs = [[*common, "--store", url, *run, "--lease-ttl", str(ttl)] for _ in ids]
    else:
        ids = [10, 5]
        argvs = [[*common, "--state", str(work / "state.json"), "--election-id", str(i), *run] for i in ids]
    paths = [work / f"events{k}.jsonl" for k in range(len(argvs))]
    procs = [start(a, p, work / f"run{k}.log") for k, (a, p) in enumerate(zip(argvs, paths))]
    try:
        (leader,) = wait(lambda: next(((k,) for k, p in enumerate(paths) if primary_now(p, names)), None))
        time.sleep(1.0)  # the others settled as standbys (a backup that connected first was deposed)
        (leader,) = wait(lambda: next(((k,) for k, p in enumerate(paths) if primary_now(p, names)), None))
        kill_ns = time.monotonic_ns()
        procs[leader].send_signal(signal.SIGKILL)
        procs[leader].wait(10)
        others = [k for k in range(len(paths)) if k != leader]
        new, done_ns = wait(lambda: next(((k, t) for k in others
                                          if (t := primary_everywhere(paths[k], names, kill_ns)) is not None), None))
        started = [e["mono_ns"] for e in events(paths[new]) if e["kind"] == "started" and e["mono_ns"] > kill_ns]
        return {"backend": backend, "all_primary_ms": round((done_ns - kill_ns) / 1e6, 1),
                "new_leader_started_ms": round((started[0] - kill_ns) / 1e6, 1) if started else None,
                "switches": len(names)}
    finally:
        stop(procs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lease-ttl", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="failover-bench-"))
    cluster = EtcdCluster(root / "etcd")
    cluster.start()
    gen = start_lab(root / "lab", topology.build(2, 2, 2, 2, name="bench_lab"), tag="fb")
    (root / "lab").mkdir()
    lab = next(gen)
    common = ["--topology", str(lab.path), "--program", lab.artifacts.program]
    out: dict[str, Any] = {"lease_ttl_s": args.lease_ttl, "runs": [], "load_avg": os.getloadavg()}
    try:
        for n in range(args.runs):
            for backend in ("file", "etcd"):
                if backend == "etcd":  # a clean slate: no record or leader key left from the last run
                    EtcdStore(parse_url(cluster.url), lab.topo.name).client.post(
                        "/kv/deleterange", {"key": b64(ROOT), "range_end": b64(range_end(ROOT))})
                r = one_run(lab, root / f"{backend}{n}", common, backend, cluster.url, args.lease_ttl)
                out["runs"].append(r)
                print(json.dumps(r), file=sys.stderr)
    finally:
        gen.close()
        cluster.stop()
    med = {b: statistics.median(r["all_primary_ms"] for r in out["runs"] if r["backend"] == b) for b in ("file", "etcd")}
    out["median_all_primary_ms"] = med
    out["aim_ms"] = (args.lease_ttl + 1) * 1000
    out["etcd_over_aim"] = round(med["etcd"] / out["aim_ms"], 3)
    out["etcd_over_file"] = round(med["etcd"] / med["file"], 2) if med["file"] else None
    out["load_avg_end"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
