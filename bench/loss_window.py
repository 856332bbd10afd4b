"""Loss-window benchmark (root, Mininet, bmv2; prints JSON): per fault kind of the lab's fault library, the
same traffic and fault under each way the fabric can survive it, side by side in one lab and one process:

- announced: leaf spraying, the controller told at once (Lab.fail: the `fabricctl fail` path);
- unattended: leaf spraying, a `fabricctl run` service in this process finds the fault by its probes
  (the service's defaults; nobody tells it anything);
- unattended-port-status: the same, also fed the lab's kernel carrier events (`--carrier-events`);
- switch-local: leaf spraying, no controller at all, the leaf's uplink group members watch their ports
  (`watch_ports: true`): run last, after the others, on the same lab with watch ports switched on;
- host: host EV mode (endpoint/: the hosts choose the EVs by their health), nobody told.

Traffic (endpoint.scenarios): h0 -> h2, h1 -> h3 (leaf p0-t0-0 to p0-t0-1), 4 QPs each. In the leaf modes
QP k keeps to plane k mod 2 (one leaf-spray EV), in host mode QP k uses two EVs (plane k mod 2, both
spines), so half the QPs never touch the fault: what they lose is the "QPs off the failure" figure
(aim 0). Per run and mode: detection (fault -> the service's record, or the hosts' first EV out of
GOOD), loss window (per QP on the fault: fault -> the send time of its last first-try loss before the
repair; the run's median), the first-try losses on and off the fault, and those at the repair (the
0.5 s after it: a restore's reconcile, a thawed switch's backlog) apart. Medians and spread over --runs.

    P4_TOOLCHAIN_BIN=... flock /tmp/srv6-lab.lock .venv/bin/python bench/loss_window.py --runs 3 --faults carrier

Not a test: Python senders and receivers and bmv2 on two shared cores; a QP's packets are
1000 * 4 / --rate ms apart, the resolution of every window.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _libfault import KINDS, LibFault  # noqa: E402
from _stats import spread  # noqa: E402
from endpoint.lab import enable  # noqa: E402
from endpoint.scenarios import EndpointSchedule, ModeResult, default_pairs, run_mode, unattended  # noqa: E402
from endpoint.unattended import Probing  # noqa: E402
from mininet_labs.lab import Lab  # noqa: E402
from mininet_labs.labstate import default_topology, prerequisites

MODES = ("announced", "unattended", "unattended-port-status", "switch-local", "host")
NO_CARRIER = "the fault leaves every port's carrier up"
NOT_APPLICABLE = {
    ("switch-local", "blackhole"): f"{NO_CARRIER}: bmv2's port monitor reports nothing, no watched member goes",
    ("switch-local", "gray"): f"{NO_CARRIER}: bmv2's port monitor reports nothing, no watched member goes",
    ("switch-local", "freeze"): (f"{NO_CARRIER} (a stopped bmv2 keeps its veths up), and the leaf's members watch "
                                 "the leaf's own ports"),
    ("unattended-port-status", "blackhole"): f"{NO_CARRIER}: no port status, the same as unattended",
    ("unattended-port-status", "gray"): f"{NO_CARRIER}: no port status, the same as unattended",
    ("unattended-port-status", "freeze"): f"{NO_CARRIER}: no port status, the same as unattended",
}
SERVICE_DOWN = ("link_down", "switch_down")


def schedule(args: argparse.Namespace, kind: str) -> EndpointSchedule:
    """Traffic from 0 s; the fault at 1 s, lasting --fault-seconds (--gray-seconds for gray: found later)."""
    held = args.gray_seconds if kind == "gray" else args.fault_seconds
    return EndpointSchedule(seconds=held + 2.0, fault_at=1.0, repair_at=1.0 + held, rate=args.rate, evs_per_qp=2,
                    leaf_evs_per_qp=1)


def digest(fault: LibFault, mode: str, r: ModeResult) -> dict[str, Any]:
    """One mode's run: detection, loss window, first-try losses on and off the fault."""
    fault_s, repair_s = r.goodput["fault_s"], r.goodput["repair_s"]
    qps = [{**q, "on_fault": q["on_fault"] if mode == "host" else fault.on_plane(q["evs"]),
            # the fault's window: from the fault to the last first-try loss sent before the repair (what the
            # repair itself costs, a restore's reconcile or a thawed switch's backlog, is counted apart)
            "window": max((round((t - fault_s) * 1e3, 1) for t in q["lost_at_s"] if fault_s <= t < repair_s),
                          default=None),
            "at_repair": sum(1 for t in q["lost_at_s"] if repair_s <= t < repair_s + 0.5)} for q in r.qps]
    on = [q for q in qps if q["on_fault"]]
    off = [q for q in qps if not q["on_fault"]]
    windows = [q["window"] for q in on if q["window"] is not None]
    row: dict[str, Any] = {
        "loss_window_ms": round(statistics.median(windows), 1) if windows else None, "windows_ms": windows,
        "qps_on_fault": len(on), "qps_off_fault": len(off),
        "lost_first_try_on_fault": sum(q["lost_first_try"] for q in on),
        "lost_first_try_off_fault": sum(q["lost_first_try"] for q in off),
        "lost_first_try_at_repair": sum(q["at_repair"] for q in qps),
        "lost_in_the_end": r.summary["lost"], "complete": r.summary["complete"],
        "spurious": r.summary["spurious"], "goodput_fault_over_healthy": r.summary["goodput_pps"]["ratio"],
        "detected_ms": None, "tables_ms": None,
        "qps": [{k: q[k] for k in ("sender", "dst", "qp", "evs", "on_fault", "lost_first_try", "window", "at_repair",
                                   "retransmitted", "max_recovery_ms", "lost_at_s")} for q in qps]}
    svc = [e for e in r.events if e["what"].startswith("controller (unattended)") and fault_s <= e["t_s"]]
    if mode.startswith("unattended"):
        found = next((e["t_s"] for e in svc if fault.detection_event(e["what"]) and e["t_s"] < repair_s + 0.5), None)
        if found is not None:
            row["detected_ms"] = round((found - fault_s) * 1e3, 1)
            tables = next((e["t_s"] for e in svc if "deltas_written" in e["what"] and e["t_s"] >= found), None)
            row["tables_ms"] = None if tables is None else round((tables - fault_s) * 1e3, 1)
        row["false_downs"] = [e["what"].rsplit(" ", 1)[-1] for e in svc if e["t_s"] < repair_s
                              and any(k in e["what"] for k in SERVICE_DOWN) and not fault.detection_event(e["what"])]
    elif mode == "announced":
        told = next((e for e in r.events if e["what"] == "controller: fail recorded and reconciled"), None)
        row["tables_ms"] = None if told is None else round(told["took_s"] * 1e3, 1)
    elif mode == "host" and r.summary["evs_detected_ms"]:
        row["detected_ms"] = round(statistics.median(r.summary["evs_detected_ms"]), 1)
    return row


def one(lab: Lab, fault: LibFault, mode: str, pairs: list[tuple[str, str]], sch: EndpointSchedule, sock: Path,
        probing: Probing) -> dict[str, Any]:
    if mode == "announced":
        return digest(fault, mode, run_mode(lab, fault, "leaf", pairs, sch))  # type: ignore[arg-type]
    if mode == "host":
        return digest(fault, mode, run_mode(lab, fault, "host", pairs, sch))  # type: ignore[arg-type]
    if mode == "switch-local":
        no_controller = ("leaf", "spray", False)
        return digest(fault, mode, run_mode(lab, fault, mode, pairs, sch, no_controller))  # type: ignore[arg-type]
    if mode == "unattended":
        return digest(fault, mode, unattended(lab, fault, pairs, sch, probing))  # type: ignore[arg-type]
    from mininet_labs.carrier import CarrierWatcher

    watcher = CarrierWatcher(lab.carrier(), sock)
    watcher.start()
    try:
        fed = dataclasses.replace(probing, carrier_events=sock)
        return digest(fault, mode, unattended(lab, fault, pairs, sch, fed))  # type: ignore[arg-type]
    finally:
        watcher.stop()


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"detected_ms": spread([r["detected_ms"] for r in rows]),
            "tables_ms": spread([r["tables_ms"] for r in rows]),
            "loss_window_ms": spread([r["loss_window_ms"] for r in rows]),
            "qp_windows_ms": spread([w for r in rows for w in r["windows_ms"]]),
            "lost_first_try_on_fault": [r["lost_first_try_on_fault"] for r in rows],
            "lost_first_try_off_fault": [r["lost_first_try_off_fault"] for r in rows],
            "qps_on_off": [rows[0]["qps_on_fault"], rows[0]["qps_off_fault"]] if rows else None,
            "lost_first_try_at_repair": [r["lost_first_try_at_repair"] for r in rows],
            "lost_in_the_end": [r["lost_in_the_end"] for r in rows],
            "spurious": [r["spurious"] for r in rows],
            "goodput_fault_over_healthy": spread([r["goodput_fault_over_healthy"] for r in rows], 3),
            **({"false_downs": [d for r in rows for d in r["false_downs"]]}
               if rows and "false_downs" in rows[0] else {}),
            "per_run": rows}


def _fmt(s: dict[str, Any]) -> str:
    if s.get("median") is None:
        return "-"
    unit = s.get("unit", " ms")
    return f"{s['median']:g}{unit}" if s["n"] == 1 else f"{s['median']:g}{unit} ({s['min']:g}-{s['max']:g})"


def longest_recovery(f: dict[str, Any]) -> dict[str, Any]:
    """Per run, the longest a QP on the fault waited for a lost packet to be acknowledged (its sender's
    max_recovery_ms): a QP that stalls stops sending first tries, so its loss window understates it."""
    return spread([max((q["max_recovery_ms"] or 0 for q in r["qps"] if q["on_fault"]), default=None)
                   for r in f["per_run"]])


def markdown(doc: dict[str, Any]) -> list[str]:
    """The table for docs/faults.md: one row per fault kind and mode (printed to stderr at the end)."""
    out = ["| fault | mode | detected | tables written | loss window: run medians | all QP windows "
           "| lost 1st try, QPs on / off the fault, per run | lost at the repair | longest recovery | goodput |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for kind, modes in doc["faults"].items():
        for mode, f in modes.items():
            if "not_applicable" in f:
                out.append(f"| {kind} | {mode} | not applicable: {f['not_applicable']} | | | | | | | |")
                continue
            on, off = f["lost_first_try_on_fault"], f["lost_first_try_off_fault"]
            detected = {"announced": "told at once", "switch-local": "-"}.get(mode) or _fmt(f["detected_ms"])
            out.append(f"| {kind} | {mode} | {detected} | {_fmt(f['tables_ms'])} | {_fmt(f['loss_window_ms'])} | "
                       f"{_fmt(f['qp_windows_ms'])} | {', '.join(map(str, on))} / {', '.join(map(str, off))} | "
                       f"{', '.join(map(str, f['lost_first_try_at_repair']))} | {_fmt(longest_recovery(f))} | "
                       f"{_fmt({**f['goodput_fault_over_healthy'], 'unit': 'x'})} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--faults", default="carrier,blackhole,gray,freeze", help=f"comma-separated: {', '.join(KINDS)}")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated: {', '.join(MODES)}")
    ap.add_argument("--rate", type=float, default=500.0, help="packets/s per sender")
    ap.add_argument("--gray-percent", type=int, default=30)
    ap.add_argument("--fault-seconds", type=float, default=2.5)
    ap.add_argument("--gray-seconds", type=float, default=6.0)
    ap.add_argument("--period-ms", type=float, default=50.0, help="unattended: probe period (the service's default)")
    ap.add_argument("--probe-timeout-ms", type=float, default=80.0, help="unattended: probe timeout floor (default)")
    ap.add_argument("--t0", default="p0-t0-0")
    ap.add_argument("--t1", default="p0-t1-1")
    ap.add_argument("--grpc-base-port", type=int, default=51401)
    args = ap.parse_args()
    kinds, modes = args.faults.split(","), args.modes.split(",")
    bad = [k for k in kinds if k not in KINDS] + [m for m in modes if m not in MODES]
    if bad:
        print(f"unknown fault kind or mode '{bad[0]}'", file=sys.stderr)
        return 2
    why = prerequisites()
    if why:
        print(json.dumps({"error": why}))
        return 2
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="loss-window-") as d, \
            Lab(default_topology(grpc_base_port=args.grpc_base_port), d, tag="lw") as lab:
        enable(lab)
        pairs = default_pairs(lab, args.t0)
        sock = Path(d) / "carrier.sock"
        faults = {k: LibFault(lab, k, args.t0, args.t1, percent=args.gray_percent) for k in kinds}
        probing = Probing(period=args.period_ms / 1000, probe_timeout=args.probe_timeout_ms / 1000)
        local = "switch-local" in modes and any(("switch-local", k) not in NOT_APPLICABLE for k in kinds)
        for _ in range(args.runs):  # taking turns, so load drifts hit every mode alike
            for k in kinds:
                for m in modes:
                    if m != "switch-local" and (m, k) not in NOT_APPLICABLE:
                        row = one(lab, faults[k], m, pairs, schedule(args, k), sock, probing)
                        rows.setdefault((k, m), []).append(row)
                        print(f"# {k} {m}: {rows[k, m][-1]['loss_window_ms']} ms", file=sys.stderr)
        if local:  # last: watch ports on for the rest of the lab's life
            lab.options = dataclasses.replace(lab.options, watch_ports=True)  # type: ignore[arg-type]
            bad_install = [o for o in lab.install().values() if not o.ok]
            if bad_install:
                raise RuntimeError(f"watch ports: {bad_install[0].error}")
            time.sleep(1.0)  # bmv2's port monitor reports nothing before its first poll (docs/faults.md)
            for _ in range(args.runs):
                for k in kinds:
                    if ("switch-local", k) not in NOT_APPLICABLE:
                        rows.setdefault((k, "switch-local"), []).append(
                            one(lab, faults[k], "switch-local", pairs, schedule(args, k), sock, probing))
    doc: dict[str, Any] = {
        "bench": "loss_window", "runs": args.runs,
        "lab": "default: 2 planes x 2 T1 x 2 T0 x 2 hosts, srv6_spray with endpoint mode; h0->h2, h1->h3, 4 QPs each",
        "where": f"{args.t0} -> {args.t1} (link faults on the leaf's end); freeze: {args.t1}",
        "rate_pps_per_sender": args.rate,
        "probing_ms": {"period": args.period_ms, "timeout_floor": args.probe_timeout_ms},
        "schedules": {k: dataclasses.asdict(schedule(args, k)) for k in kinds},
        "faults": {k: {m: ({"not_applicable": NOT_APPLICABLE[m, k]} if (m, k) in NOT_APPLICABLE else
                           figures(rows.get((k, m), []))) for m in modes} for k in kinds},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_start": [round(x, 2) for x in load_start],
                    "load_avg_end": [round(x, 2) for x in os.getloadavg()]},
    }
    print(json.dumps(doc, indent=1))
    print("\n".join(markdown(doc)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
