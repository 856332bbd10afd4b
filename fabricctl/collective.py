"""`fabricctl lab collective` and `fabricctl lab shape`: a training collective on the running lab, side by
side under several path-selection schemes, with an optional fault mid-run; and the links' rate."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from controller import exitcodes
from controller.exitcodes import OpError
from fabricctl.options import Finite

DEFAULT_DIR = "/tmp/srv6-fabric-lab"
SCHEME_NAMES = ("ecmp", "eecmp", "pin", "leaf-spray", "host-spray", "ethereal")  # endpoint.collective.schemes


def _attach(lab_dir: Path) -> Any:
    from fabricctl.lab import _attach as attach

    return attach(lab_dir)


def parse_fault(text: str) -> tuple[str, tuple[str, ...], tuple[tuple[str, Any], ...]]:
    """'freeze p0-t1-0' or 'gray p0-t0-0 p0-t1-1 percent=20' -> (kind, target, params)."""
    words = text.split()
    if not words:
        raise click.BadParameter("name a fault: KIND TARGET... [KEY=VALUE...] (e.g. 'freeze p0-t1-0')")
    target = tuple(w for w in words[1:] if "=" not in w)
    params = []
    for w in words[1:]:
        if "=" in w:
            k, _, v = w.partition("=")
            params.append((k, int(v) if v.isdigit() else v))
    return words[0], target, tuple(params)


@contextmanager
def _bar(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar over the transfers on stderr when it is a terminal (made at the first tick: the
    total is known then)."""
    if not sys.stderr.isatty():
        yield lambda done, total: None
        return
    bars: list[Any] = []
    at = [0]

    def tick(done: int, total: int) -> None:
        if not bars:
            bars.append(click.progressbar(length=total, label=label, file=sys.stderr, show_percent=True))
            bars[0].__enter__()
        if done > at[0]:
            bars[0].update(done - at[0])
            at[0] = done

    try:
        yield tick
    finally:
        if bars:
            bars[0].__exit__(None, None, None)


@click.command("collective")
@click.option("--dir", "lab_dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DIR,
              show_default=True, envvar="FABRIC_LAB_DIR", help="The lab directory (env FABRIC_LAB_DIR).")
@click.option("--collective", default="allreduce", show_default=True,
              type=click.Choice(["allreduce", "allgather", "reducescatter", "alltoall", "allreduce_hd"]))
@click.option("--size", type=click.IntRange(1024, 1 << 30), default=256 * 1024, show_default=True,
              help="Bytes (nccl-tests' meaning: AllReduce, each rank's buffer).")
@click.option("--iterations", type=click.IntRange(1, 1000), default=5, show_default=True)
@click.option("--warmup", type=click.IntRange(0, 100), default=1, show_default=True)
@click.option("--qps", type=click.IntRange(1, 64), default=2, show_default=True, help="QPs per connection.")
@click.option("--strategy", type=click.Choice(["split", "round_robin"]), default="split", show_default=True,
              help="QP scaling: every message split over the QPs, or each whole on the next QP.")
@click.option("--placement", default="packed", show_default=True,
              help="packed | spread | uneven | the hosts in rank order (h0,h2,...).")
@click.option("--scheme", "schemes", multiple=True, type=click.Choice([*SCHEME_NAMES, "all"]),
              help="Path selection (repeatable; default ecmp; 'all': every one the data plane carries).")
@click.option("--link-rate", type=Finite(0), default=None,
              help="Shape every link to this many Mbit/s first (0: unshape); default: as the lab is.")
@click.option("--window", type=click.IntRange(1, 256), default=4, show_default=True, help="Packets in flight per QP.")
@click.option("--mtu", type=click.IntRange(64, 1400), default=1024, show_default=True, help="Data bytes per packet.")
@click.option("--fault", "fault_text", help="A fault of the lab's library mid-run: 'freeze p0-t1-0', "
              "'blackhole p0-t0-0 p0-t1-1', 'gray p0-t0-0 p0-t1-1 percent=20', 'host-nic-down h0 0' "
              "(kernel lab: blackhole and host-nic-down).")
@click.option("--fault-at", type=Finite(0), default=1.0, show_default=True, help="Seconds after the start.")
@click.option("--repair-at", type=Finite(0), default=None, help="Seconds after the start (default: at the end).")
@click.option("--nic-failover", type=click.Choice(["none", "shift"]), default="none", show_default=True,
              help="shift: the QPs of a failed host NIC move to another NIC of the host and what they had in "
                   "flight is sent again there (SHIFT; schemes that bind a QP to one NIC: ecmp, eecmp, pin, "
                   "leaf-spray); none: a NIC failing under busy QPs fails the run.")
@click.option("--controller", is_flag=True, help="Run the controller service (it detects and heals) meanwhile.")
@click.option("--run-timeout", "timeout", type=Finite(1), default=300.0, show_default=True,
              help="Seconds a scheme's run may take (--timeout is the global switch timeout).")
@click.option("--png", "png_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Per-iteration bus bandwidth over time per scheme, the fault and repair marked.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def collective(lab_dir: Path, collective: str, size: int, iterations: int, warmup: int, qps: int, strategy: str,
               placement: str, schemes: tuple[str, ...], link_rate: float | None, window: int, mtu: int,
               fault_text: str | None, fault_at: float, repair_at: float | None, nic_failover: str, controller: bool,
               timeout: float,
               png_path: Path | None, as_json: bool) -> None:
    """Run a collective on the lab's hosts under each path-selection scheme and report per scheme the
    completion time (median, p99, max), bus bandwidth, slowdown against the ideal, link balance and
    retransmissions; exit 1 when a byte did not arrive exactly once or a step started early.

    \b
    Examples:
      fabricctl lab collective --link-rate 1                     # ring AllReduce, 5-tuple ECMP
      fabricctl lab collective --scheme ecmp --scheme eecmp --qps 4
      fabricctl lab collective --scheme leaf-spray --fault 'freeze p0-t1-0' --controller --png ar.png
      fabricctl lab collective --scheme eecmp --nic-failover shift --fault 'host-nic-down h0 0'
    """
    from controller.workload import CollectiveError, PlacementError, Workload, place, schedule
    from endpoint.collective.rank import Transport
    from endpoint.collective.report import job, png, table
    from endpoint.collective.run import Fault
    from endpoint.collective.schemes import SCHEMES
    from mininet_labs.lab import LabError
    from mininet_labs.shaping import LinkRate, shape, unshape

    running = _attach(lab_dir)
    kernel = getattr(running, "dataplane", "bmv2") == "kernel"
    names = list(schemes) or ["ecmp"]
    if "all" in names:
        names = [n for n in SCHEME_NAMES if not (kernel and SCHEMES[n].kernel)]
    if kernel:
        bad = [n for n in names if SCHEMES[n].kernel]
        if bad:
            raise OpError(f"the kernel data plane cannot carry {bad[0]}: {SCHEMES[bad[0]].kernel}")
    fault = None
    if fault_text:
        kind, target, params = parse_fault(fault_text)
        fault = Fault(kind, target, params)
    try:
        sched = schedule(Workload(collective, size, iterations, warmup, qps, strategy),  # type: ignore[arg-type]
                         place(running.model, placement))
    except (CollectiveError, PlacementError) as e:
        raise OpError(str(e)) from None
    reports = []
    try:
        if link_rate is not None:
            if link_rate > 0:
                shape(running, LinkRate(link_rate))
            else:
                unshape(running)
        transport = Transport(window=window, mtu=mtu, nic_failover=nic_failover)
        for n in names:
            with _bar(f"{n:<11}") as tick:
                reports.append(job(running, sched, SCHEMES[n], transport, fault=fault,
                                   fault_at=fault_at if fault else None, repair_at=repair_at, timeout=timeout,
                                   controller=controller, progress=tick))
    except LabError as e:
        raise OpError(str(e), exitcodes.SWITCH_ERROR) from None
    if png_path is not None:
        from controller.plotting import PlotUnavailable

        try:
            png(reports, png_path)
        except PlotUnavailable as e:
            raise OpError(str(e)) from None
    if as_json:
        click.echo(json.dumps({"reports": [r.to_json() for r in reports]}, indent=1))
    else:
        for line in table(reports):
            click.echo(line)
    if any(r.problems for r in reports):
        for r in reports:
            for p in r.problems[:5]:
                click.echo(f"error: {r.scheme.name}: {p}", err=True)
        raise click.exceptions.Exit(exitcodes.SWITCH_ERROR)


@click.command("shape")
@click.option("--dir", "lab_dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DIR,
              show_default=True, envvar="FABRIC_LAB_DIR", help="The lab directory (env FABRIC_LAB_DIR).")
@click.option("--rate", type=Finite(0), help="Mbit/s on every link, both directions (tbf).")
@click.option("--off", is_flag=True, help="Remove the shaping.")
def shape_cmd(lab_dir: Path, rate: float | None, off: bool) -> None:
    """Hold every link of the lab (leaf-spine and host-leaf, both directions) to one rate, so the links
    and not the switches' CPUs are the bottleneck; without options, print the rate in force.

    \b
    Examples:
      fabricctl lab shape --rate 1
      fabricctl lab shape --off
    """
    from mininet_labs.lab import LabError
    from mininet_labs.shaping import LinkRate, current, shape, unshape

    running = _attach(lab_dir)
    try:
        if off:
            click.echo(f"unshaped {unshape(running)} link ends")
        elif rate is not None:
            click.echo(f"shaped {shape(running, LinkRate(rate))} link ends to {rate:g} Mbit/s")
        else:
            now = current(running.dir)
            click.echo(f"{now.mbit:g} Mbit/s on every link" if now else "unshaped")
    except LabError as e:
        raise OpError(str(e), exitcodes.SWITCH_ERROR) from None
