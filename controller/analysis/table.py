"""The text table of `fabricctl analyze`: one column per design, one row per figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

HOURS_PER_YEAR = 8766


def num(x: float | None) -> str:
    """Three significant digits, or '-' for none."""
    if x is None:
        return "-"
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e5:
        return f"{x:.3g}"
    return f"{x:.2e}"


def hours(x: float | None) -> str:
    if x is None:
        return "never"
    return f"{num(x)} h" + (f" ({num(x / HOURS_PER_YEAR)} y)" if x >= HOURS_PER_YEAR else "")


def est(e: dict[str, float] | None, unit: str = "") -> str:
    if e is None:
        return "-"
    return f"{num(e['value'])}{unit} [{num(e['lo'])}, {num(e['hi'])}]"


def _rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    d, pair, job, cap = r["design"], r["pair"], r["job"], r["capacity"]
    rows = [("design (planes x T1 x T0 x hosts/T0)", d["spec"]),
            ("GPUs / switches / links", f"{d['gpus']} / {d['switches']} / {d['links']}")]
    for k, label in (("link", "links"), ("t1", "T1s"), ("t0", "T0s"), ("nic", "NIC ports"), ("any", "any mix")):
        w = r["worst_case"][k]
        rows.append((f"endured with certainty: {label}", "any number" if w["endured"] is None else str(w["endured"])))
    rows.append(("given pair", " - ".join(pair["hosts"]) + (" (same T0)" if pair["same_t0"] else "")))
    rows.append(("P(pair cut) in one plane, steady state", num(pair["p_cut_one_plane"])))
    rows.append(("P(pair cut) in every plane, steady state", num(pair["p_cut_every_plane"])))
    for k, label in (("link", "links"), ("t1", "T1s"), ("t0", "T0s"), ("nic", "NIC ports")):
        e, own = pair["expected_failures_to_cut"][k], pair["expected_own_failures_to_cut"][k]
        rows.append((f"E[{label} failed to cut pair] (its own)", "never" if e is None else f"{num(e)} ({num(own)})"))
    rows.append(("pair: mean time to cut, no repair", hours(pair["mean_hours_to_cut_no_repair"])))
    rows.append(("pair: mean time between cuts, repair", hours(pair["mtbi_hours"])))
    rows.append(("uplink / host capacity lost, steady state", f"{num(cap['uplink_lost'])} / {num(cap['host_lost'])}"))
    anyp = r["any_pair"]
    rows.append(("any pair: E[NIC failures to a cut] closed", num(anyp["expected_nic_failures_to_cut"])))
    rows.append(("any pair: failures to a cut, MC", est(anyp["mc_failures_to_cut"]) if anyp["mc_failures_to_cut"]
                 else f"skipped: {anyp['mc_skipped']}"))
    rows.append(("job GPUs (T0s)", f"{job['gpus']} ({job['t0s']})"))
    rows.append(("job: hours to interruption, no repair, MC", est(job["no_repair"]["hours_to_interruption"])))
    rows.append(("job: own failures to interruption, MC", est(job["no_repair"]["own_failures_to_interruption"])))
    rep = job["with_repair"]
    rows.append(("job: interruptions/h with repair, closed", num(rep["interruptions_per_hour"])))
    rows.append(("job: mean time between interruptions", hours(rep["mtbi_hours"])))
    if rep["mc"] is not None:
        m = rep["mc"]
        rows.append(("job: interruptions/h with repair, MC", f"{m['interruptions']} in {num(m['hours'])} h: "
                     + est(m["per_hour"])))
    curve = r["curve"]
    for k, e in zip(curve["failures"], curve["p_job_cut"]):
        rows.append((f"P(job cut | {k} of its own {curve['kind']} failures), MC", est(e)))
    return rows


def render(results: Sequence[dict[str, Any]]) -> str:
    """All designs side by side (the figure names on the left)."""
    columns = [_rows(r) for r in results]
    labels = [label for label, _ in columns[0]]
    table = [["", *(r["design"]["name"] for r in results)]]
    table += [[label, *(col[i][1] for col in columns)] for i, label in enumerate(labels)]
    widths = [max(len(row[c]) for row in table) for c in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    lines.append("[lo, hi]: 95% intervals (Wilson for probabilities, normal for means, Garwood for rates); "
                 "'own' counts only the pair's or job's own components")
    return "\n".join(lines)
