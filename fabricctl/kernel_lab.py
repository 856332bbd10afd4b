"""`fabricctl lab up --dataplane` and `fabricctl lab demo`: the lab on the kernel data plane where bmv2 is absent.

fabricctl.lab calls in here (a few one-line hooks): `choose` picks the data plane, `up` starts a kernel
lab, `is_kernel`/`attach`/`down`/`status` serve the lab commands when the directory holds a kernel lab,
and `demo` is the whole main job in one command.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Callable
from typing import Any

import click

from controller import ops
from controller.ops import OpError
from fabricctl.options import Finite

DEMO_DIR = "/tmp/srv6-fabric-demo"
CANNOT = ("per-packet spraying in the switch", "E-ECMP on the BTH QP (eecmp_qp_hash)", "pinned QPs",
          "ECN marking and trimming", "P4 drop and path counters", "P4Runtime (shell, kill-switch, balance)")


def choose(requested: str) -> tuple[str, str]:
    """(data plane, why): bmv2 where simple_switch_grpc and Mininet are at hand, else the kernel's."""
    from mininet_labs.lab import prerequisites as bmv2_missing

    if requested != "auto":
        return requested, "asked for"
    why = bmv2_missing()
    if why is None:
        return "bmv2", "simple_switch_grpc and Mininet found"
    return "kernel", f"{why}; the kernel's SRv6 needs neither"


def is_kernel(lab_dir: Path) -> bool:
    from mininet_labs.kernel.lab import is_kernel_lab

    return is_kernel_lab(lab_dir)


def attach(lab_dir: Path) -> Any:
    from mininet_labs.kernel.lab import KernelLab
    from mininet_labs.lab import LabError

    try:
        return KernelLab.attach(lab_dir)
    except LabError as e:
        raise OpError(str(e), ops.SWITCH_ERROR) from None


def up(model: Any, lab_dir: Path, tag: str, install: bool, as_json: bool, program: str, why: str,
       unsupported: dict[str, bool], store: Any = None) -> None:
    """Start a kernel lab of `model` and print what `lab up` prints for bmv2 (`store`: where the record whose
    plan is installed lives, None: the lab's state file)."""
    from mininet_labs.kernel.lab import KernelLab, size_problem
    from mininet_labs.lab import LabError

    too_big = size_problem(model)
    if too_big:
        raise OpError(too_big)
    asked = [k for k, v in unsupported.items() if v]
    if asked:
        raise OpError(f"{asked[0]} needs the bmv2 data plane: the kernel data plane has no bmv2 process "
                      "(docs/kernel.md); use --dataplane bmv2 where simple_switch_grpc is installed")
    try:
        lab = KernelLab(model, lab_dir, name=tag or None, program=program)
        lab.store = store
        running = lab.up(install=install)
    except LabError as e:
        raise OpError(str(e), ops.TOOLCHAIN if "root" in str(e) or "not found" in str(e) else ops.SWITCH_ERROR) from None
    if as_json:
        click.echo(json.dumps(running.status(), indent=2))
        return
    st = running.kstate
    click.echo(f"lab up in {st.timings.get('up_s', 0):.1f}s on the kernel data plane ({why}): "
               f"{len(model.switches)} switches, {len(model.hosts)} hosts, srv6_spray "
               f"({', '.join(f'{k} {v}s' for k, v in st.timings.items() if k != 'up_s')})")
    click.echo(f"  dir: {st.lab_dir} (state kernel-lab.json); switches are namespaces sf-{st.name}-<switch>")
    for name in running.hosts:
        click.echo(f"  {name}: " + ", ".join(f"{n.intf} {n.v6}" for n in running.host(name).nics))
    click.echo(f"  ip netns exec sf-{st.name}-p0-t0-0 ip -6 route      # a leaf's routes")
    click.echo("  next: fabricctl lab traffic; fabricctl lab down")


def down(lab_dir: Path, as_json: bool) -> None:
    from mininet_labs.kernel.lab import cleanup
    from mininet_labs.lab import LabError

    try:
        report = cleanup(lab_dir)
    except LabError as e:
        raise OpError(str(e)) from None
    if as_json:
        click.echo(json.dumps({"clean": report.clean, "killed": report.killed, "deleted_namespaces": report.deleted_intfs,
                               "leftover_pids": report.leftover_pids, "leftover_namespaces": report.leftover_intfs}))
    elif report.clean:
        click.echo(f"lab down: {len(report.deleted_intfs)} namespaces removed, {len(report.killed)} processes stopped; "
                   f"logs kept in {lab_dir}")
    if not report.clean:
        raise OpError(f"lab down left {len(report.leftover_pids)} processes and namespaces {report.leftover_intfs[:5]}",
                      ops.SWITCH_ERROR)


def status(lab_dir: Path, check: bool, as_json: bool, prepare: Callable[[Any], Any] = lambda lab: lab) -> None:
    running = prepare(attach(lab_dir))  # prepare: e.g. the record kept in fabricctl's --store
    doc = running.status()
    if check:
        outcomes = running.install(dry_run=True)
        doc["plan"] = {n: ({"in_sync": not o.delta, "missing": len(o.delta.inserts), "extra": len(o.delta.deletes),
                            "differing": len(o.delta.modifies)} if o.ok else {"error": o.error})
                       for n, o in outcomes.items()}
    dead = [n for n, s in {**doc["switches"], **doc["hosts"]}.items() if not s["alive"]]
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(f"lab {doc['lab_dir']}: {doc['phase']}, kernel data plane, "
                   f"{doc['namespaces_present']}/{doc['namespaces']} namespaces present")
        for n, s in doc["switches"].items():
            plan = doc.get("plan", {}).get(n)
            sync = "" if plan is None else ("  in sync" if plan.get("in_sync") else f"  {plan}")
            click.echo(f"  {n}: {s['netns']} {'up' if s['alive'] else 'GONE'}{sync}")
        for n, h in doc["hosts"].items():
            click.echo(f"  {n}: {h['netns']} {'up' if h['alive'] else 'GONE'}; " + "; ".join(h["nics"]))
    if dead or any("error" in p or not p.get("in_sync") for p in doc.get("plan", {}).values()):
        raise click.exceptions.Exit(ops.SWITCH_ERROR)


# --- the demo --------------------------------------------------------------------------------------

@click.command("demo")
@click.option("--dataplane", type=click.Choice(["auto", "kernel", "bmv2"]), default="auto", show_default=True,
              help="auto: bmv2 where simple_switch_grpc is found, else the kernel's SRv6.")
@click.option("--dir", "lab_dir", type=click.Path(file_okay=False, path_type=Path), default=DEMO_DIR,
              show_default=True, help="Where the demo lab lives while it runs.")
@click.option("--rate", type=Finite(50, 5000), default=400.0, show_default=True,
              help="Packets per second per sender.")
@click.option("--seconds", type=Finite(2, 60), default=4.0, show_default=True, help="Traffic duration.")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE.png",
              help="Also draw the packets delivered per plane over time, with the cut and the recovery marked.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table (with the timeline).")
def demo(dataplane: str, lab_dir: Path, rate: float, seconds: float, png: Path | None, as_json: bool) -> None:
    """The main job in one command: the default two-plane lab up, RoCEv2 between every host pair, a
    link cut mid-traffic and announced to the controller, the loss window and the recovery, teardown.

    Exit 0 only when every check held: all pairs delivered before, the other plane lost nothing,
    every QP recovered, every switch back on its plan after the restore, all pairs delivered after,
    and nothing of the lab left.

    \b
    Examples:
      fabricctl lab demo
      fabricctl lab demo --dataplane kernel --json
      fabricctl lab demo --png demo.png
    """
    from mininet_labs.kernel.demo import run

    if png is not None:  # before the lab: a missing matplotlib or folder is said at once
        from controller.plotting import PlotUnavailable, pyplot

        try:
            pyplot()
        except PlotUnavailable as e:
            raise OpError(str(e), ops.TOOLCHAIN) from None
        if not png.parent.is_dir():
            raise OpError(f"--png {png}: no folder {png.parent}")
    kind, why = choose(dataplane)
    try:
        result = run(kind, why, lab_dir, rate=rate, seconds=seconds)
    except ValueError as e:
        raise OpError(str(e)) from None
    click.echo(json.dumps(result, indent=1) if as_json else "\n".join(_table(result)))
    if png is not None and result.get("timeline", {}).get("planes"):
        from mininet_labs import plot

        try:
            plot.timeline(plot_doc(result), png)
        except OSError as e:
            raise OpError(f"--png {png}: {e.strerror or e}") from None
    if png is not None and not as_json:
        click.echo(f"  plot: {png}" if result.get("timeline", {}).get("planes") else
                   "  plot: none (the traffic did not run)")
    if not result["ok"]:
        raise click.exceptions.Exit(ops.SWITCH_ERROR)


def plot_doc(result: dict[str, Any]) -> dict[str, Any]:
    """The demo's result as mininet_labs.plot.timeline draws a scenario: its timeline and events, the failure, the
    median loss window of the QPs through the cut and what the other plane's QPs lost."""
    checks = {c["check"]: c for c in result["checks"]}
    recovered = checks.get("plane 0 QPs recover", {})
    other = checks.get("plane 1 QPs", {})
    return {"kind": f"demo ({result['dataplane']})", "failure": f"link {result['link']}",
            "timeline": result["timeline"], "events": result["events"],
            "summary": {"loss_window_ms": {"median": recovered.get("loss_window_median_ms")},
                        "lost_elsewhere": other.get("lost")}}


def _table(result: dict[str, Any]) -> list[str]:
    out = [f"demo on the {result['dataplane']} data plane ({result['why']}): {result['fabric']}, "
           f"{result['elapsed_s']:.1f}s in all"]
    width = max(len(c["check"]) for c in result["checks"])
    out.append(f"  {'step':<{width}}  {'ok':<4}  result")
    for c in result["checks"]:
        out.append(f"  {c['check']:<{width}}  {'ok' if c['ok'] else 'FAIL':<4}  {c['result']}")
    if result["dataplane"] == "kernel":
        out.append("  not on the kernel data plane (docs/kernel.md): " + ", ".join(CANNOT))
    return out


