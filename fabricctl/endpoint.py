"""fabricctl endpoint: endpoint mode (hosts spray over their own SRv6 EVs) on a running lab."""

from __future__ import annotations

import json
from pathlib import Path

import click

from controller import ops
from controller.ops import OpError
from fabricctl.options import MAX_SECONDS, Finite

FAULTS = ("cut", "blackhole", "gray", "slow", "incast")


@click.group("endpoint")
def endpoint() -> None:
    """Endpoint mode (MRC): hosts write the uSID carriers and route around faults themselves.

    \b
    Examples:
      fabricctl lab up --t1 4
      fabricctl endpoint compare cut p0-t0-0 p0-t1-1 --png cut.png
      fabricctl endpoint compare gray p0-t0-0 p0-t1-1 --percent 10 --modes host,host-spray --json
      fabricctl endpoint compare incast h2 --modes host,host-trim
    """


@endpoint.command("compare")
@click.argument("fault", type=click.Choice(FAULTS))
@click.argument("where", nargs=-1, required=True, metavar="T0 T1 | HOST")
@click.option("--modes", help="Comma-separated. Link faults (default leaf,host): leaf (leaves spray, controller "
                              "told), leaf-unattended (leaves spray, a controller service in this process finds the "
                              "fault by its probes), host (health-aware EVs), host-spray, host-ethereal, host-hash. "
                              "incast (default "
                              "host,host-trim): host, host-trim, leaf, leaf-trim (-trim: the switches trim).")
@click.option("--percent", type=click.IntRange(1, 100), default=10, show_default=True, help="gray: loss in percent.")
@click.option("--rate-limit", default="2mbit", show_default=True, help="slow: the tbf rate on the T0's uplink.")
@click.option("--rate", type=Finite(min=1), default=500.0, show_default=True, help="Packets/s per sender.")
@click.option("--seconds", type=Finite(min=1, max=MAX_SECONDS), default=4.0, show_default=True)
@click.option("--fault-at", type=Finite(min=0.3, max=MAX_SECONDS), default=1.0, show_default=True)
@click.option("--repair-at", type=Finite(min=0.5, max=MAX_SECONDS), default=2.5, show_default=True)
@click.option("--min-rto-ms", type=Finite(min=1), default=25.0, show_default=True)
@click.option("--senders", help="incast: comma-separated senders (default: every host under another leaf).")
@click.option("--bottleneck-pps", type=click.IntRange(1, 1_000_000), default=200, show_default=True,
              help="incast: packets/s the receiving host's leaf ports serve during the fault.")
@click.option("--queue-depth", type=click.IntRange(1, 4096), default=32, show_default=True,
              help="incast: those ports' egress queue capacity in packets (a full queue tail-drops).")
@click.option("--trim-at", type=click.IntRange(1, 4096), default=8, show_default=True,
              help="incast, -trim modes: trim packets that find this many queued ahead.")
@click.option("--ecn-at", type=click.IntRange(0, 4096), default=0, show_default=True,
              help="incast: mark ECN CE from this queue depth in every mode (0: off; below --trim-at).")
@click.option("--dir", "lab_dir", type=click.Path(file_okay=False, path_type=Path), default="/tmp/srv6-fabric-lab",
              show_default=True, help="The lab's directory.")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), help="Plot goodput and reordering per mode.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def compare_cmd(fault: str, where: tuple[str, ...], modes: str | None, percent: int, rate_limit: str, rate: float,
                seconds: float, fault_at: float, repair_at: float, min_rto_ms: float, senders: str | None,
                bottleneck_pps: int, queue_depth: int, trim_at: int, ecn_at: int, lab_dir: Path, png: Path | None,
                as_json: bool) -> None:
    """The same traffic and the same fault on link T0 -- T1 (incast: to HOST), mode after mode, side by side.

    Every host under T0 sends to its peer under the next leaf over 4 QPs. `leaf`: plain RoCEv2,
    the leaves spray, the fault is announced to the controller at once (`fabricctl fail link`)
    and restored after the repair; host modes: the hosts write the carriers and nobody is told.
    Per mode: first-try losses, retransmissions, loss window (fault to the last first-try loss),
    goodput during the fault against before it, reorder histogram, CE and trim counts.

    incast HOST: every host under another leaf (--senders) sends to HOST, whose leaf ports are a bottleneck
    from --fault-at to --repair-at (bmv2 queue rate and depth); trimming off (host, leaf) or on
    (host-trim, leaf-trim); the senders' DCTCP congestion window on in every mode. Also per mode:
    the time from a lost or trimmed send to its resend by how it was seen (nack, sack, timeout)
    and the bottleneck ports' CE-marked and trimmed packets as the switches counted them.

    \b
    Examples:
      fabricctl endpoint compare cut p0-t0-0 p0-t1-1 --png cut.png
      fabricctl endpoint compare blackhole p0-t0-0 p0-t1-1 --modes leaf,host,host-spray
      fabricctl endpoint compare slow p0-t0-0 p0-t1-1 --rate-limit 1mbit --json > slow.json
      fabricctl endpoint compare incast h2 --bottleneck-pps 200 --trim-at 8 --png incast.png
    """
    from endpoint import scenarios
    from mininet_labs.lab import Lab, LabError

    if not fault_at < repair_at < seconds:
        raise OpError(f"need --fault-at ({fault_at}) < --repair-at ({repair_at}) < --seconds ({seconds})")
    incast = fault == "incast"
    if len(where) != (1 if incast else 2):
        raise OpError(f"{fault} takes {'one host' if incast else 'two switches, T0 and T1'}, got {len(where)} "
                      f"argument{'s' * (len(where) != 1)}")
    known = scenarios.INCAST_MODES if incast else scenarios.MODES
    modes = modes if modes is not None else "host,host-trim" if incast else "leaf,host"
    chosen = tuple(m.strip() for m in modes.split(",") if m.strip())
    bad = [m for m in chosen if m not in known]
    if bad or not chosen:
        raise OpError(f"unknown mode '{bad[0] if bad else modes}' (known: {', '.join(known)})")
    if incast and ecn_at and ecn_at >= trim_at:
        raise OpError(f"--ecn-at ({ecn_at}) must be below --trim-at ({trim_at})")
    if png is not None:
        from controller.plotting import PlotUnavailable, pyplot as _pyplot
        try:
            _pyplot()
        except PlotUnavailable as e:
            raise OpError(str(e), ops.TOOLCHAIN) from None
    try:
        lab = Lab.attach(lab_dir)
        sch = scenarios.Schedule(seconds=seconds, fault_at=fault_at, repair_at=repair_at, rate=rate,
                                 min_rto_ms=min_rto_ms)
        if incast:
            if where[0] not in lab.model.hosts:
                raise OpError(f"unknown host '{where[0]}' (hosts: {', '.join(lab.hosts)})")
            chosen_senders = [s.strip() for s in senders.split(",") if s.strip()] if senders else None
            result = scenarios.compare_incast(lab, where[0], senders=chosen_senders, modes=chosen, schedule=sch,
                                              pps=bottleneck_pps, depth=queue_depth, ecn_qdepth=ecn_at,
                                              trim_qdepth=trim_at)
        else:
            for name in where:
                if not lab.model.has_switch(name):
                    raise OpError(f"unknown switch '{name}'")
            result = scenarios.compare(lab, fault, *where, modes=chosen, schedule=sch, percent=percent,
                                       rate=rate_limit)
    except LabError as e:
        raise OpError(str(e), ops.SWITCH_ERROR) from None
    doc = result.to_json()
    if png is not None:
        from endpoint.plot import comparison
        comparison(doc, png)
    click.echo(json.dumps(doc, indent=1) if as_json else "\n".join(scenarios.describe(result)))
