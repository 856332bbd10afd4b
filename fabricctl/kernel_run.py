"""`fabricctl run` on a topology whose switches are all on the kernel data plane: carrier and link probes are the
signals (controller.service.carrierheal); the options only the P4 service has are refused by name."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from controller import ops
from controller.ops import OpError
from controller.service.events import EventLog
from controller.service.runner import EVENTS_NAME
from controller.service.linkdetect import ProbeSettings
from controller.southbound.fleet import kind_of
from controller.state.statelock import StateLocked
from controller.failover import FailoverError
from controller.model.topology import Topology

KEPT = {"events_file", "duration",  # what run's options mean on the kernel data plane too
        "period", "probe_timeout", "k", "m", "window", "gray_loss", "max_damping", "no_probe"}


def all_kernel(topo: Topology) -> bool:
    return bool(topo.switches) and all(kind_of(s) == "netlink" for s in topo.switches)


def refuse_p4_options(ctx: click.Context) -> None:
    """OpError naming the first option given that only the P4 service has (probes, counters, sessions, web, etcd)."""
    for p in ctx.command.params:
        if p.name and p.name not in KEPT and ctx.get_parameter_source(p.name) not in (ParameterSource.DEFAULT, None):
            flag = max(p.opts, key=len) if getattr(p, "opts", None) else p.name
            raise OpError(f"{flag} is an option of the P4 service (P4 probes, P4Runtime sessions): on the kernel data "
                          "plane 'fabricctl run' heals on carrier and link probes (docs/kernel.md)", ops.BAD_INPUT)


def run_kernel(env: Any, topo: Topology, duration: float, events_file: Path | None,
               probing: ProbeSettings | None = None) -> None:
    """Heal a kernel fabric on carrier (and link probes with `probing`) until SIGTERM/Ctrl-C or `duration`; exit 1
    if a reconcile failed."""
    from controller.service.carrierheal import run as heal  # pyroute2 only where a kernel fabric runs
    from controller.southbound.linkprobe import LinkProbeError
    from controller.southbound.linkwatch import LinkWatchError

    if getattr(env, "store_url", None):
        raise OpError("--store etcd:// is not available on the kernel data plane yet: run on the state file",
                      ops.BAD_INPUT)
    state = env.state_path()
    env.failures()  # exit 2 on an unreadable state file, before anything starts
    fleet = env.fleet()
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        events = EventLog(events_file or state.with_name(EVENTS_NAME))
    except OSError as e:
        raise OpError(f"cannot open the events file: {e}", ops.BAD_INPUT) from None
    probes = (f"each link probed both ways every {probing.period * 1000:g} ms (K {probing.thresholds.fail_after}, "
              f"M {probing.thresholds.restore_after})" if probing else "no probes (--no-probe)")
    click.echo(f"running on the kernel data plane: {len(topo.switches)} switches, carrier watched in their "
               f"namespaces, {probes}; events {events.path}", err=True)
    try:
        errors = heal(topo, env.program, state, fleet, events, stop, duration, say=click.echo, probing=probing,
                       warn=lambda line: click.echo(line, err=True))
    except (LinkWatchError, LinkProbeError) as e:
        raise OpError(str(e), ops.SWITCH_ERROR) from None
    except (StateLocked, FailoverError) as e:
        raise OpError(str(e), ops.SWITCH_ERROR) from None
    finally:
        events.close()
    if errors:
        raise click.exceptions.Exit(ops.SWITCH_ERROR)
