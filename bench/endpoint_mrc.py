"""Endpoint-mode benchmark (root, Mininet, bmv2; prints JSON): host EV spraying against leaf spraying + the
controller, on a lab of 2 planes x 4 T1 x 2 T0 x 2 hosts, all in one process and one lab:

- cut: the loss window of host EV mode (fault to a QP's last first-try loss) against the sender's
  minimum RTO (aim <= 3x) and against the controller path in the same run (aim >= 10x shorter), the
  controller told at once (leaf) and finding the cut by its own probes (leaf-unattended);
- gray 10% (and 1%): goodput during the fault over healthy, health-aware against oblivious spraying
  (aim: health-aware >= 95%);
- blackhole (one direction) and slow path (tbf on one uplink): the same table;
- single-path (Ethereal: each message split into equal parts, each part on the
  least-loaded EV) against per-packet spraying, healthy and under each fault;
- incast: h0 and h1 to h2 while h2's leaf ports serve 200 packets/s (bmv2 queue rate, 32 deep), trimming
  off against on (trim at 8 queued): the time from a lost or trimmed send to its resend, by how the loss
  was seen, in ms and in the EV's SRTT (aim: ~1 RTT with trimming instead of an RTO), ECN/trim counts of
  the switches and of the receiver, goodput.

    P4_TOOLCHAIN_BIN=/opt/p4-toolchain/bin flock /tmp/srv6-heavy.lock .venv/bin/python bench/endpoint_mrc.py --runs 3
    ... bench/endpoint_mrc.py --runs 3 --scenarios incast          # only the incast

Not a test: Python senders and receivers and bmv2 on two shared cores; RTTs of 1-3 ms with spikes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from endpoint.scenarios import EndpointSchedule, compare, compare_incast  # noqa: E402
from mininet_labs.lab import Lab  # noqa: E402
from mininet_labs.labstate import default_topology, prerequisites

T0, T1 = "p0-t0-0", "p0-t1-1"


def spread(values: list[float]) -> dict[str, Any]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"n": 0}
    return {"median": round(statistics.median(vals), 3), "min": round(min(vals), 3), "max": round(max(vals), 3),
            "n": len(vals)}


def digest(mode: dict[str, Any]) -> dict[str, Any]:
    s = mode["summary"]
    return {"lost_first_try": s["lost_first_try"], "retransmitted": s["retransmitted"], "lost": s["lost"],
            "complete": s["complete"], "loss_window_ms": s["loss_window_ms"], "goodput": s["goodput_pps"],
            "reorder": s["reorder"], "ecn": s["ecn"], "trimmed": s["trimmed"], "evs_detected_ms": s["evs_detected_ms"],
            "evs_sent_while_failed": s["evs_sent_while_failed"], "lost_outside_fault": s["lost_outside_fault"],
            "max_recovery_ms": max((q["max_recovery_ms"] or 0 for q in mode["qps"]), default=0),
            "controller_detected_ms": s.get("controller_detected_ms"),
            "windows_ms": [q["loss_window_ms"] for q in mode["qps"] if q["loss_window_ms"] is not None]}


INCAST_SCHEDULE = EndpointSchedule(seconds=4.0, fault_at=1.0, repair_at=3.0, rate=300.0, min_rto_ms=25.0)


def incast_digest(mode: dict[str, Any]) -> dict[str, Any]:
    s = mode["summary"]
    return {"lost_first_try": s["lost_first_try"], "retransmitted": s["retransmitted"], "lost": s["lost"],
            "spurious": s["spurious"], "complete": s["complete"], "goodput": s["goodput_pps"],
            "resend_delay_ms": s["resend_delay_ms"], "resend_srtts": s["resend_srtts"], "rtt_ms": s["rtt_ms"],
            "ecn": s["ecn"], "trimmed": s["trimmed"], "trimmed_unmatched": s["trimmed_unmatched"],
            "switch": {k: s["switch"][k] for k in ("ce_marked", "trimmed", "fabric")},
            "all_delays_ms": sorted(d for q in mode["qps"] for ds in q["resend_delay_ms"].values() for d in ds),
            "nack_delays_ms": sorted(d for q in mode["qps"] for d in q["resend_delay_ms"].get("nack", [])),
            "nack_srtts": sorted(r for q in mode["qps"] for r in q["resend_srtts"].get("nack", [])),
            "all_srtts": sorted(r for q in mode["qps"] for rs in q["resend_srtts"].values() for r in rs),
            # what the senders saw and did: resends by how the loss was seen, CE echoes, congestion-window cuts
            "resends_by_how": {how: d["count"] for how, d in s["resend_delay_ms"].items()},
            "sender_ce_echoes": sum(q["ecn"] for q in mode["qps"]),
            "cwnd_cuts": sum(q.get("cwnd_cuts") or 0 for q in mode["qps"])}


def incast_figures(runs: list[dict[str, Any]], min_rto_ms: float) -> dict[str, Any]:
    """Per mode over the runs: loss-to-resend medians (all losses; NACKed ones), goodput, counts; the aim."""
    def per(mode: str, key: str) -> list[Any]:
        return [r[mode][key] for r in runs if mode in r]

    def med(xs: list[float]) -> float | None:
        return statistics.median(xs) if xs else None

    figures: dict[str, Any] = {}
    for mode in ("host", "host-trim"):
        figures[mode] = {
            "loss_to_resend_ms_median_per_run": [med(x) for x in per(mode, "all_delays_ms")],
            "loss_to_resend_ms_all_runs": spread([d for x in per(mode, "all_delays_ms") for d in x]),
            "nack_to_resend_ms": spread([d for x in per(mode, "nack_delays_ms") for d in x]),
            "nack_in_srtts": spread([d for x in per(mode, "nack_srtts") for d in x]),
            "by_how": per(mode, "resend_delay_ms"), "in_srtts_by_how": per(mode, "resend_srtts"),
            "goodput_fault_over_healthy": spread([g["ratio"] for g in per(mode, "goodput")]),
            "lost_first_try": per(mode, "lost_first_try"), "retransmitted": per(mode, "retransmitted"),
            "spurious": per(mode, "spurious"), "lost_in_the_end": per(mode, "lost"),
            "switch_trimmed": [s["trimmed"] for s in per(mode, "switch")],
            "receiver_trimmed": [a + b for a, b in zip(per(mode, "trimmed"), per(mode, "trimmed_unmatched"))],
            "switch_ce": [s["ce_marked"] for s in per(mode, "switch")], "receiver_ce": per(mode, "ecn"),
            "min_rtt_ms": [r["min_median"] for r in per(mode, "rtt_ms")],
            "loss_to_resend_srtts_median_per_run": [med(x) for x in per(mode, "all_srtts")],
            "nack_srtts_median_per_run": [med(x) for x in per(mode, "nack_srtts")],
            "resends_by_how_per_run": per(mode, "resends_by_how"),
            "sender_ce_echoes_per_run": per(mode, "sender_ce_echoes"), "cwnd_cuts_per_run": per(mode, "cwnd_cuts"),
            "goodput_fault_pps_per_run": [g["fault"] for g in per(mode, "goodput")],
        }
    trim, off = figures["host-trim"], figures["host"]
    same_run = [a / b for a, b in zip(trim["loss_to_resend_ms_median_per_run"], off["loss_to_resend_ms_median_per_run"])
                if a and b]
    figures["trim_over_off_loss_to_resend_same_run"] = spread(same_run)
    goodput = [a / b for a, b in zip(trim["goodput_fault_pps_per_run"], off["goodput_fault_pps_per_run"]) if a and b]
    figures["trim_over_off_goodput_same_run"] = spread(goodput)
    nack = trim["nack_in_srtts"]
    srtts = [x for x in trim["loss_to_resend_srtts_median_per_run"] if x is not None]
    figures["aim"] = {  # the incast aims, per run (every run must meet them)
        "loss_to_resend_le_2_srtt": bool(srtts) and max(srtts) <= 2,
        "loss_to_resend_le_half_of_off_same_run": bool(same_run) and max(same_run) <= 0.5,
        "goodput_ge_1_3x_off_same_run": bool(goodput) and min(goodput) >= 1.3,
        "nack_resend_within_1_5_srtt_median": nack.get("median") is not None and nack["median"] <= 1.5,
        "nack_resend_median_below_min_rto": trim["nack_to_resend_ms"].get("median") is not None
        and trim["nack_to_resend_ms"]["median"] < min_rto_ms,
    }
    return figures


def late_share(reorder: dict[str, int]) -> float:
    total = sum(reorder.values()) or 1
    return round(1 - reorder.get("0", 0) / total, 4)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of the cut and gray 10%% comparisons")
    ap.add_argument("--rate", type=float, default=500.0, help="packets/s per sender")
    ap.add_argument("--min-rto-ms", type=float, default=25.0)
    ap.add_argument("--grpc-base-port", type=int, default=52600 + os.getpid() % 20 * 20)
    ap.add_argument("--scenarios", default="cut,gray10,gray1,blackhole,slow,incast",
                    help="comma-separated subset of cut,gray10,gray1,blackhole,slow,incast")
    args = ap.parse_args()
    why = prerequisites()
    if why:
        print(json.dumps({"error": why}))
        return 2
    sch = EndpointSchedule(seconds=4.0, fault_at=1.0, repair_at=2.5, rate=args.rate, min_rto_ms=args.min_rto_ms)
    out: dict[str, list[dict[str, Any]]] = {}

    def run(name: str, kind: str, modes: tuple[str, ...], lab: Lab, **kw: Any) -> None:
        c = compare(lab, kind, T0, T1, modes=modes, schedule=sch, **kw).to_json()
        out.setdefault(name, []).append({m["mode"]: digest(m) for m in c["modes"]})
        print(f"# {name}: " + ", ".join(f"{m['mode']} lost1st {m['summary']['lost_first_try']} goodput "
                                       f"x{m['summary']['goodput_pps']['ratio']}" for m in c["modes"]), file=sys.stderr)

    chosen = set(args.scenarios.split(","))
    incast: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="endpoint-mrc-") as d, \
            Lab(default_topology(2, 4, 2, 2, grpc_base_port=args.grpc_base_port), d, tag=f"b{os.getpid() % 100}") as lab:
        for _ in range(args.runs):
            if "cut" in chosen:
                run("cut", "cut", ("leaf", "leaf-unattended", "host", "host-spray", "host-ethereal"), lab)
            if "gray10" in chosen:
                run("gray10", "gray", ("host", "host-spray", "host-ethereal"), lab, percent=10)
            if "incast" in chosen:
                c = compare_incast(lab, "h2", modes=("host", "host-trim"), schedule=INCAST_SCHEDULE).to_json()
                incast.append({m["mode"]: incast_digest(m) for m in c["modes"]})
                print("# incast: " + ", ".join(f"{m['mode']} resend {m['summary']['resend_delay_ms']}"
                                               for m in c["modes"]), file=sys.stderr)
        if "gray1" in chosen:
            run("gray1", "gray", ("host", "host-spray", "host-ethereal"), lab, percent=1)
        if "blackhole" in chosen:
            run("blackhole", "blackhole", ("leaf", "host", "host-spray", "host-ethereal"), lab)
        if "slow" in chosen:
            run("slow", "slow", ("host", "host-spray", "host-ethereal"), lab, rate="200kbit")

    def per_mode(name: str, mode: str, key: str) -> list[Any]:
        return [r[mode][key] for r in out.get(name, []) if mode in r]

    host_w = [w for ws in per_mode("cut", "host", "windows_ms") for w in ws]
    leaf_w = [w for ws in per_mode("cut", "leaf", "windows_ms") for w in ws]
    ratios = [statistics.median(lw) / statistics.median(hw) for lw, hw in
              zip(per_mode("cut", "leaf", "windows_ms"), per_mode("cut", "host", "windows_ms")) if lw and hw]
    gp = {m: [g["ratio"] for g in per_mode("gray10", m, "goodput")] for m in ("host", "host-spray", "host-ethereal")}
    doc: dict[str, Any] = {
        "bench": "endpoint_mrc", "lab": "2 planes x 4 T1 x 2 T0 x 2 hosts, srv6_spray; h0->h2 and h1->h3, 4 QPs each",
        "schedule": vars(sch), "runs": args.runs,
        "cut": {
            "host_loss_window_ms": spread(host_w), "leaf_controller_loss_window_ms": spread(leaf_w),
            "host_window_over_min_rto": spread([w / args.min_rto_ms for w in host_w]),
            "leaf_over_host_window_same_run": spread(ratios),
            "host_ev_detected_ms": spread([t for ts in per_mode("cut", "host", "evs_detected_ms") for t in ts]),
            "host_sent_on_failed_ev": sum(per_mode("cut", "host", "evs_sent_while_failed")),
            "unattended_loss_window_ms": spread([w for ws in per_mode("cut", "leaf-unattended", "windows_ms") for w in ws]),
            "unattended_detected_ms": per_mode("cut", "leaf-unattended", "controller_detected_ms"),
            "lost_first_try": {m: per_mode("cut", m, "lost_first_try") for m in ("leaf", "leaf-unattended", "host",
                                                                                 "host-spray", "host-ethereal")},
            "aim": {"window_le_3x_min_rto": bool(host_w) and max(host_w) <= 3 * args.min_rto_ms,
                    "leaf_ge_10x_host": bool(ratios) and min(ratios) >= 10},
        },
        "gray10": {
            "goodput_fault_over_healthy": {m: spread(v) for m, v in gp.items()},
            "lost_first_try": {m: per_mode("gray10", m, "lost_first_try") for m in gp},
            "health_over_spray_goodput": spread([h / s for h, s in zip(gp["host"], gp["host-spray"]) if h and s]),
            "aim": {"health_ge_95pct": bool(gp["host"]) and min(gp["host"]) >= 0.95},
        },
        "ethereal_vs_spraying": {
            name: {m: {"goodput_ratio": spread([g["ratio"] for g in per_mode(name, m, "goodput")]),
                       "lost_first_try": per_mode(name, m, "lost_first_try"),
                       "late_share": [late_share(r) for r in per_mode(name, m, "reorder")],
                       "max_recovery_ms": per_mode(name, m, "max_recovery_ms")}
                   for m in ("host", "host-spray", "host-ethereal")}
            for name in ("cut", "gray10", "gray1", "blackhole", "slow")},
        "incast": incast_figures(incast, args.min_rto_ms) if incast else None,
        "per_run": {**out, **({"incast": incast} if incast else {})},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
