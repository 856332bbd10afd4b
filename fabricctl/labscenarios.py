"""`fabricctl lab fail-scenario`, `lab cross-plane`, `lab balance`: failures and load measured on a running lab."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from controller import exitcodes
from controller.exitcodes import OpError
from fabricctl.lab import _attach, _dir_option, _json_option
from fabricctl.options import Finite
from controller.plotting import PlotUnavailable


def _schedule_options(f: Any) -> Any:
    for opt in reversed([
        click.option("--rate", type=Finite(1), default=400.0, show_default=True,
                     help="Packets per second per sender (bmv2 on two cores: a few hundred)."),
        click.option("--qps", type=click.IntRange(1), default=4, show_default=True, help="QPs per host pair."),
        click.option("--seconds", type=Finite(1), default=5.0, show_default=True, help="Traffic duration."),
        click.option("--fault-at", "--fail-at", "fault_at", type=Finite(0), default=1.5, show_default=True,
                     help="Seconds after the senders start that the failure happens."),
        click.option("--repair-at", "--restore-at", "repair_at", type=Finite(0), default=3.0, show_default=True,
                     help="Seconds after the senders start that it is repaired."),
        click.option("--png", type=click.Path(dir_okay=False, path_type=Path),
                     help="Plot delivered packets per plane over time to this PNG (needs matplotlib)."),
    ]):
        f = opt(f)
    return _json_option(_dir_option(f))


def _run_scenario(lab_dir: Path, run: Any, seconds: float, fault_at: float, repair_at: float, rate: float, qps: int,
                  png: Path | None, as_json: bool) -> None:
    from mininet_labs import scenarios
    from mininet_labs.faults import Schedule
    from mininet_labs.lab import LabError

    schedule = Schedule(seconds=seconds, fault_at=fault_at, repair_at=repair_at, rate=rate, qps=qps)
    if (problem := schedule.problem()) is not None:
        raise OpError(problem)
    running = _attach(lab_dir)
    try:
        result = run(running, schedule)
    except LabError as e:
        raise OpError(str(e), exitcodes.SWITCH_ERROR) from None
    doc = result.to_json()
    _plot("timeline", doc, png)
    click.echo(json.dumps(doc, indent=1) if as_json else "\n".join(scenarios.describe(result)))
    if png is not None and not as_json:
        click.echo(f"  plot: {png}")
    s = result.summary()
    if s["lost_elsewhere"] or not s["tables_ok"] or s["uplink_recovered"] is False:
        raise click.exceptions.Exit(exitcodes.SWITCH_ERROR)


def _plot(kind: str, doc: dict[str, Any], png: Path | None) -> None:
    if png is None:
        return
    from mininet_labs import plot

    try:
        getattr(plot, kind)(doc, png)
    except PlotUnavailable as e:
        raise OpError(str(e), exitcodes.TOOLCHAIN) from None


@click.group("fail-scenario")
def fail_scenario() -> None:
    """Fail a link or a T1 while RoCEv2 traffic runs; measure loss windows and the recovery.

    The lab cuts the link's ports (MTU 68: every fabric frame dropped; a bmv2 port taken down
    stops the whole switch), then tells the controller as `fabricctl fail` does (record, reconcile
    the touched switches); later mends the ports and restores. QPs are pinned evenly over the
    spines, so those whose path used the failure are known: the others must lose nothing. Exit 1
    when they did, when the failed segments did not leave and come back, or when the uplink does
    not carry traffic after the restore.

    \b
    Examples:
      fabricctl lab fail-scenario link p0-t0-0 p0-t1-1 --png link.png
      fabricctl lab fail-scenario switch p0-t1-1 --json > switch.json
    """


@fail_scenario.command("link")
@click.argument("t0")
@click.argument("t1")
@_schedule_options
def fail_link_scenario(t0: str, t1: str, lab_dir: Path, rate: float, qps: int, seconds: float, fault_at: float,
                       repair_at: float, png: Path | None, as_json: bool) -> None:
    """A T0-T1 link down mid-traffic, then restored.

    \b
    Example:
      fabricctl lab fail-scenario link p0-t0-0 p0-t1-1 --png link.png
    """
    from mininet_labs import scenarios

    _run_scenario(lab_dir, lambda lab, sch: scenarios.link_failure(lab, t0, t1, schedule=sch), seconds, fault_at,
                  repair_at, rate, qps, png, as_json)


@fail_scenario.command("switch")
@click.argument("name")
@_schedule_options
def fail_switch_scenario(name: str, lab_dir: Path, rate: float, qps: int, seconds: float, fault_at: float,
                         repair_at: float, png: Path | None, as_json: bool) -> None:
    """Every link of a T1 down mid-traffic, then restored (the spine is not contacted while down).

    \b
    Example:
      fabricctl lab fail-scenario switch p0-t1-1 --json > switch.json
    """
    from mininet_labs import scenarios

    _run_scenario(lab_dir, lambda lab, sch: scenarios.switch_failure(lab, name, schedule=sch), seconds, fault_at,
                  repair_at, rate, qps, png, as_json)


@click.command("cross-plane")
@click.argument("host")
@click.option("--plane", type=click.IntRange(0), default=0, show_default=True, help="The plane whose NIC goes down.")
@_schedule_options
def cross_plane_cmd(host: str, plane: int, lab_dir: Path, rate: float, qps: int, seconds: float, fault_at: float,
                    repair_at: float, png: Path | None, as_json: bool) -> None:
    """A host's NIC into one plane goes down mid-traffic: its QPs move to the other planes.

    The host's sender sees the carrier go and re-homes that plane's QPs; senders towards the host
    are told when the lab records the failure (`fabricctl fail port`). The NIC then comes back and
    the QPs return. Exit 1 if a QP of another plane lost packets.

    \b
    Example:
      fabricctl lab cross-plane h0 --plane 0 --png cross.png
    """
    from mininet_labs import scenarios

    _run_scenario(lab_dir, lambda lab, sch: scenarios.cross_plane(lab, host, plane, schedule=sch), seconds, fault_at,
                  repair_at, rate, qps, png, as_json)


@click.command("balance")
@_dir_option
@click.option("--qps", type=click.IntRange(1), default=8, show_default=True, help="QPs per host pair.")
@click.option("--messages", type=click.IntRange(1), default=64, show_default=True,
              help="One-packet messages per host pair and mode.")
@click.option("--rate", type=Finite(1), default=500.0, show_default=True, help="Packets/s per sender.")
@click.option("--sport", type=click.IntRange(1, 65535), default=49152, show_default=True,
              help="The one UDP source port of every QP.")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), help="Bar chart of max/mean per mode.")
@_json_option
def balance_cmd(lab_dir: Path, qps: int, messages: int, rate: float, sport: int, png: Path | None,
                as_json: bool) -> None:
    """The same traffic under every hash mode; max/mean uplink load per mode from the counters.

    srv6_spray FLOW, QP, PACKET and pinned, eecmp_qp_hash FIVE_TUPLE, QP and PIN: each installed
    in turn (the pipeline switched as needed), every host sending to every host under another leaf,
    then the lab's program and plan are put back. 1.0 is an even load.

    \b
    Example:
      fabricctl lab balance --png balance.png
    """
    from mininet_labs import balance
    from mininet_labs.lab import LabError

    running = _attach(lab_dir)
    try:
        result = balance.balance(running, qps=qps, messages=messages, sport=sport, rate=rate)
    except LabError as e:
        raise OpError(str(e), exitcodes.SWITCH_ERROR) from None
    doc = result.to_json()
    _plot("balance", doc, png)
    click.echo(json.dumps(doc, indent=1) if as_json else "\n".join(result.table()))
    if png is not None and not as_json:
        click.echo(f"  plot: {png}")
