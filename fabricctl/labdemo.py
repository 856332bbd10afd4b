"""`fabricctl lab demo`: the main job in one command, on whichever data plane this machine has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from controller import exitcodes
from controller.exitcodes import OpError
from fabricctl.options import Finite

DEMO_DIR = "/tmp/srv6-fabric-demo"


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
@click.option("--no-failover", is_flag=True, help="Cut the link without telling the controller: the demo must then "
              "fail (a test of its checks).")
def demo(dataplane: str, lab_dir: Path, rate: float, seconds: float, png: Path | None, as_json: bool,
         no_failover: bool) -> None:
    """The main job in one command: the default two-plane lab up, RoCEv2 between every host pair, a
    link cut mid-traffic and announced to the controller, the loss window and the recovery, teardown.

    Exit 0 only when every check held: all pairs delivered before; the controller reconciled the
    switches the plan changes; the other plane lost nothing; some plane 0 QPs crossed the cut, none
    went longer than the stated bound without delivery and none lost packets after the reconcile;
    every switch back on its plan after the restore; all pairs delivered after; nothing of the lab left.

    \b
    Examples:
      fabricctl lab demo
      fabricctl lab demo --dataplane kernel --json
      fabricctl lab demo --png demo.png
    """
    from mininet_labs.backends import choose
    from mininet_labs.demo import run

    if png is not None:  # before the lab: a missing matplotlib or folder is said at once
        from controller.plotting import PlotUnavailable, pyplot

        try:
            pyplot()
        except PlotUnavailable as e:
            raise OpError(str(e), exitcodes.TOOLCHAIN) from None
        if not png.parent.is_dir():
            raise OpError(f"--png {png}: no folder {png.parent}")
    kind, why = choose(dataplane)
    try:
        result = run(kind, why, lab_dir, rate=rate, seconds=seconds, failover=not no_failover)
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
        raise click.exceptions.Exit(exitcodes.SWITCH_ERROR)


def plot_doc(result: dict[str, Any]) -> dict[str, Any]:
    """The demo's result as mininet_labs.plot.timeline draws a scenario: its timeline and events, the failure, the
    median loss window of the QPs through the cut and what the other plane's QPs lost."""
    checks = {c["check"]: c for c in result["checks"]}
    recovered = checks.get("plane 0 loss window", {})
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
    if result.get("lacks"):
        out.append(f"  not on the {result['dataplane']} data plane (docs/kernel.md): " + ", ".join(result["lacks"]))
    return out


