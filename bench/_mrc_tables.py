"""bench/mrc_scenarios.py's JSON across invocations: several merged into one (a long bench is split to keep each
invocation under the lab lock short), and the Markdown rows of docs/endpoint.md's table made from it."""

from __future__ import annotations

from typing import Any

SAME = ("bench", "dataplane", "rate_pps_per_sender", "runs")  # what invocations must share to be one table


class MergeError(ValueError):
    """Invocations that do not make one table; one line saying why."""


def merge(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The invocations' scenarios in one document, in the order given: a scenario in several invocations has
    its modes together; each invocation's argv, commit, machine and seconds kept under `invocations`.
    MergeError when they differ in what makes a table one (SAME), or measure one mode of a scenario twice."""
    if not docs:
        raise MergeError("nothing to merge")
    first = docs[0]
    out: dict[str, Any] = {k: first.get(k) for k in (*SAME, "lab")}
    out["invocations"], out["scenarios"] = [], {}
    for i, d in enumerate(docs):
        for k in SAME:
            if d.get(k) != first.get(k):
                raise MergeError(f"invocation {i + 1} has {k} {d.get(k)!r}, the first {first.get(k)!r}")
        out["invocations"].append({k: d.get(k) for k in ("argv", "commit", "machine", "seconds")})
        for name, sc in d["scenarios"].items():
            have = out["scenarios"].setdefault(name, {**{k: v for k, v in sc.items() if k != "modes"}, "modes": {}})
            for mode, r in sc["modes"].items():
                if mode in have["modes"]:
                    raise MergeError(f"{name} {mode} is measured in more than one invocation (invocation {i + 1} again)")
                have["modes"][mode] = r
    return out


def cell(s: dict[str, Any] | None, unit: str = "") -> str:
    """A spread as 'median (min-max)'; one figure when they agree; '-' for none."""
    if not s or not s.get("n"):
        return "-"
    m = f"{s['median']:g}{unit}"
    return m if s["min"] == s["max"] else f"{m} ({s['min']:g}-{s['max']:g})"


def load_span(loads: list[float | None]) -> str:
    vs = [v for v in loads if v is not None]
    return "-" if not vs else f"{min(vs):g}" if min(vs) == max(vs) else f"{min(vs):g}-{max(vs):g}"


def markdown_rows(doc: dict[str, Any]) -> list[str]:
    """One row per scenario and mode: throughput during / right after over the baseline run's, back after,
    first tries lost and QPs failed, EVs mapped out (and where), the load averages of the runs."""
    rows = ["| scenario (paper) | mode | throughput during / right after, over the baseline | back after, ms | "
            "first tries lost (4 senders); QPs failed | mapped out, ms after the fault | load |", "|---|---|---|---|---|---|---|"]
    for name, sc in doc["scenarios"].items():
        head = f"**{name}** ({sc.get('paper', '')})" + (f"; {sc['scale']}" if sc.get("scale") else "")
        for mode, r in sc["modes"].items():
            s = r["summary"]
            mapped = cell(s["mapped_out_ms"])
            if s.get("evs_through_fault"):
                mapped += f", {s['evs_mapped_out']} of {s['evs_through_fault']} EVs"
            ports = {k: cell(v) for k, v in s.get("port_change_ms", {}).items() if v.get("n")}
            if ports:
                mapped += "; port down seen " + ", ".join(f"{k} {v}" for k, v in ports.items())
            rows.append(f"|{' ' + head if head else ''} | {mode} | {cell(s['during_over_baseline'])} / {cell(s['after_over_baseline'])} | "
                        f"{cell(s['recovery_ms'])} | {cell(s['lost_first_try'])}; {s['qps_failed']} | {mapped} | "
                        f"{load_span(s['load1'])} |")
            head = ""
    return rows
