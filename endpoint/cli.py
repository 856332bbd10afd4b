"""fabricctl endpoint: endpoint mode (hosts spray over their own SRv6 EVs) on a running lab."""

from __future__ import annotations

import json
from pathlib import Path

import click

from controller import ops
from controller.ops import OpError

FAULTS = ("cut", "blackhole", "gray", "slow")


@click.group("endpoint")
def endpoint() -> None:
    """Endpoint mode (MRC, issue 10): hosts write the uSID carriers and route around faults themselves.

    \b
    Examples:
      fabricctl lab up --t1 4
      fabricctl endpoint compare cut p0-t0-0 p0-t1-1 --png cut.png
      fabricctl endpoint compare gray p0-t0-0 p0-t1-1 --percent 10 --modes host,host-spray --json
    """


@endpoint.command("compare")
@click.argument("fault", type=click.Choice(FAULTS))
@click.argument("t0")
@click.argument("t1")
@click.option("--modes", default="leaf,host", show_default=True,
              help="Comma-separated: leaf (leaves spray, controller told), host (health-aware EVs), host-spray, "
                   "host-ethereal, host-hash.")
@click.option("--percent", type=click.IntRange(1, 100), default=10, show_default=True, help="gray: loss in percent.")
@click.option("--rate-limit", default="2mbit", show_default=True, help="slow: the tbf rate on the T0's uplink.")
@click.option("--rate", type=click.FloatRange(min=1), default=500.0, show_default=True, help="Packets/s per sender.")
@click.option("--seconds", type=click.FloatRange(min=1), default=4.0, show_default=True)
@click.option("--fault-at", type=click.FloatRange(min=0.3), default=1.0, show_default=True)
@click.option("--repair-at", type=click.FloatRange(min=0.5), default=2.5, show_default=True)
@click.option("--min-rto-ms", type=click.FloatRange(min=1), default=25.0, show_default=True)
@click.option("--dir", "lab_dir", type=click.Path(file_okay=False, path_type=Path), default="/tmp/srv6-fabric-lab",
              show_default=True, help="The lab's directory.")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), help="Plot goodput and reordering per mode.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def compare_cmd(fault: str, t0: str, t1: str, modes: str, percent: int, rate_limit: str, rate: float, seconds: float,
                fault_at: float, repair_at: float, min_rto_ms: float, lab_dir: Path, png: Path | None,
                as_json: bool) -> None:
    """The same traffic and the same fault on link T0 -- T1, mode after mode, side by side.

    Every host under T0 sends to its peer under the next leaf over 4 QPs. `leaf`: plain RoCEv2,
    the leaves spray, the fault is announced to the controller at once (`fabricctl fail link`)
    and restored after the repair; host modes: the hosts write the carriers and nobody is told.
    Per mode: first-try losses, retransmissions, loss window (fault to the last first-try loss),
    goodput during the fault against before it, reorder histogram, CE and trim counts.

    \b
    Examples:
      fabricctl endpoint compare cut p0-t0-0 p0-t1-1 --png cut.png
      fabricctl endpoint compare blackhole p0-t0-0 p0-t1-1 --modes leaf,host,host-spray
      fabricctl endpoint compare slow p0-t0-0 p0-t1-1 --rate-limit 1mbit --json > slow.json
    """
    from endpoint import scenarios
    from mininet_labs.lab import Lab, LabError

    if not fault_at < repair_at < seconds:
        raise OpError(f"need --fault-at ({fault_at}) < --repair-at ({repair_at}) < --seconds ({seconds})")
    chosen = tuple(m.strip() for m in modes.split(",") if m.strip())
    bad = [m for m in chosen if m not in scenarios.MODES]
    if bad or not chosen:
        raise OpError(f"unknown mode '{bad[0] if bad else modes}' (known: {', '.join(scenarios.MODES)})")
    if png is not None:
        from mininet_labs.plot import PlotUnavailable, _pyplot
        try:
            _pyplot()
        except PlotUnavailable as e:
            raise OpError(str(e), ops.TOOLCHAIN) from None
    try:
        lab = Lab.attach(lab_dir)
        for name in (t0, t1):
            if not lab.model.has_switch(name):
                raise OpError(f"unknown switch '{name}'")
        sch = scenarios.Schedule(seconds=seconds, fault_at=fault_at, repair_at=repair_at, rate=rate,
                                 min_rto_ms=min_rto_ms)
        result = scenarios.compare(lab, fault, t0, t1, modes=chosen, schedule=sch, percent=percent, rate=rate_limit)
    except LabError as e:
        raise OpError(str(e), ops.SWITCH_ERROR) from None
    doc = result.to_json()
    if png is not None:
        from endpoint.plot import comparison
        comparison(doc, png)
    click.echo(json.dumps(doc, indent=1) if as_json else "\n".join(scenarios.describe(result)))
