"""`fabricctl run` (the controller service, foreground) and `fabricctl events` (its JSON-lines stream)."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from controller.exitcodes import BAD_INPUT, SWITCH_ERROR, OpError
from controller.service.detect import Thresholds
from controller.service.events import read
from controller.service.portstatus import path_problem
from controller.service.runner import EVENTS_NAME, Config, FabricService, handle_class, needs_lease, refused
from controller.southbound.base import DataPlaneError
from controller.southbound.fleet import kind_of, where
from fabricctl.options import MAX_SECONDS, Finite


@click.command("run")
@click.option("--period", type=Finite(min=1, max=10000), default=50.0, show_default=True, metavar="MS",
              help="Probe period per link direction (the 2-core lab sustains 50 ms; at 20 ms the controller takes "
              "most of a core and its probes queue: bench/service_probe_load.py).")
@click.option("--probe-timeout", type=Finite(min=1, max=60000), default=80.0, show_default=True,
              metavar="MS", help="A probe not back this long after it left is lost: the floor of the timeout, "
              "which rises to twice the 99th percentile of recent probe delays (and to 1.5x a late probe's delay) "
              "on a busy fabric.")
@click.option("--fail-after", "k", type=click.IntRange(min=1), default=3, show_default=True, metavar="K",
              help="Consecutive lost probes that fail a link.")
@click.option("--restore-after", "m", type=click.IntRange(min=1), default=50, show_default=True, metavar="M",
              help="Consecutive probes back that restore a failed link (doubled per recent flap).")
@click.option("--window", type=click.IntRange(min=1), default=100, show_default=True, metavar="N",
              help="Probes over which the gray-failure loss ratio is taken.")
@click.option("--gray-loss", type=Finite(min=0, max=1, min_open=True), default=0.1, show_default=True,
              metavar="RATIO", help="Loss ratio over the window that fails a link (gray failure).")
@click.option("--max-damping", type=click.IntRange(min=0, max=10), default=4, show_default=True,
              help="Flap damping: M is doubled at most this many times.")
@click.option("--metrics-port", type=click.IntRange(min=0, max=65535), default=0, show_default=True,
              help="Serve Prometheus metrics on 127.0.0.1:PORT (0: off).")
@click.option("--events", "events_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help=f"Events file (JSON lines) [default: {EVENTS_NAME} next to the state file].")
@click.option("--counters-every", type=Finite(min=0, max=MAX_SECONDS), default=5.0, show_default=True, metavar="SECONDS",
              help="Read per-port and drop counters for the metrics this often (0: never).")
@click.option("--nice", type=click.IntRange(min=-20, max=19), default=-10, show_default=True,
              help="Nice value of the controller's threads: on cores shared with switches and traffic, a starved "
              "controller sees healthy links' probes late. Below 0 needs root (else a warning, and as started).")
@click.option("--port-evidence/--no-port-evidence", default=True, show_default=True,
              help="K lost probes fail a link only if its port counters agree (packets left the source port, none "
              "reached the far one): late probes on a busy fabric then fail nothing.")
@click.option("--host-probes/--no-host-probes", default=True, show_default=True,
              help="Probe every host NIC too: a Neighbor Solicitation out of its T0 port each period, the NA punted "
              "back; K unanswered (with the port counters agreeing) record the host port failed (a NIC down).")
@click.option("--host-probe-every", "host_every", type=click.IntRange(min=1, max=1000), default=5, show_default=True,
              metavar="N", help="Probe host NICs every N probe periods (each NIC costs as much as a link direction).")
@click.option("--switch-deadline", type=Finite(min=10, max=60000), default=500.0, show_default=True,
              metavar="MS", help="Every call to a switch has this long; a switch that leaves one unanswered while "
              "the others answer and no probe crosses it is recorded failed (as 'fabricctl fail switch').")
@click.option("--ping-every", type=Finite(min=0, max=60000), default=100.0, show_default=True, metavar="MS",
              help="A liveness call (P4Runtime Capabilities) to each switch this often (0: none).")
@click.option("--carrier-events", type=click.Path(dir_okay=False, path_type=Path), metavar="SOCKET",
              help="Listen on this unix datagram socket for port status (a port's carrier lost or back, e.g. from "
              "'fabricctl lab carrier-watch'): a lost carrier fails its link at once, the probes restore it.")
@click.option("--endpoints", "endpoints_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), metavar="DIR",
              help="Push the recorded denylist to the endpoints there, as the leader (a standby pushes nothing): an "
              "endpoint run's directory (RUN/control-HOST.sock, RUN/evs.json) or a lab's directory, whose latest "
              "endpoint run is looked up again at every push. DENIED for the EVs crossing a denied link, UNKNOWN again "
              "once no denied link is on them; hosts are told in parallel, on a thread of their own.")
@click.option("--loops", "loops_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), metavar="DIR",
              help="With --endpoints: record the hosts' loop agents' reports there (DIR/loops-HOST.json) into the "
              "denylist first, as 'fabricctl endpoint denylist DIR --push' does.")
@click.option("--endpoint-timeout", type=Finite(min=0.01, max=60), default=0.5, show_default=True, metavar="SECONDS",
              help="With --endpoints: the deadline of each request to a sender's control socket.")
@click.option("--no-probe", is_flag=True, help="Hold the sessions and the plan, but send no probes.")
@click.option("--duration", type=Finite(min=0, max=MAX_SECONDS), default=0.0, metavar="SECONDS",
              help="Stop after this long (0: run until SIGTERM or Ctrl-C).")
@click.option("--web", "web_listen", metavar="HOST:PORT",
              help="Serve the live view there too (as 'fabricctl web'; loopback unless --web-allow-remote).")
@click.option("--web-allow-remote", is_flag=True, help="Allow a non-loopback --web address.")
@click.option("--lease-ttl", type=click.IntRange(min=2, max=60), default=3, show_default=True, metavar="SECONDS",
              help="With --store etcd://: the leader's lease. Controllers campaign under it; the winner's election "
              "id is its win's etcd revision (high 64 bits), so each new leader's is higher; a leader that cannot "
              "renew stops writing a quarter TTL (at least 0.5 s) before the lease can expire (docs/store.md).")
@click.pass_obj
def run_cmd(env: Any, period: float, probe_timeout: float, k: int, m: int, window: int, gray_loss: float,
            max_damping: int, metrics_port: int, events_file: Path | None, counters_every: float, nice: int,
            port_evidence: bool, host_probes: bool, host_every: int, switch_deadline: float, ping_every: float,
            carrier_events: Path | None, endpoints_dir: Path | None, loops_dir: Path | None, endpoint_timeout: float,
            no_probe: bool, duration: float, web_listen: str | None, web_allow_remote: bool, lease_ttl: int) -> None:
    """Run the controller: hold the fabric at its plan and heal it by itself.

    Each switch is held as its record says: a switch that names a network namespace (the kernel
    data plane) is programmed over netlink, probed with UDP datagrams between its links' link-local
    addresses, and its ports' carrier fails a link at once; any other is a P4Runtime switch. A
    fabric may mix them. An option a switch's data plane cannot carry is refused, naming it. On a
    state file, switches that elect no writer themselves (namespaces) are held by one controller
    at a time: a second 'run' waits as a standby and takes over when the first stops.

    Keeps one P4Runtime stream per switch (reconnecting with backoff), is primary where its
    --election-id is the highest (else a hot backup that takes over when the primary goes), pushes
    the pipeline where a switch has none, installs the plan of the recorded failures, then probes
    both directions of every T0-T1 link (packet-out at one end, packet-in at the other). K probes
    lost in a row, or a loss ratio over the window (gray failure), records the link failed in the
    state file (under its lock, shared with 'fabricctl fail/restore') and writes the failover
    deltas; M probes back in a row restore it. Events go to a JSON-lines file ('fabricctl events
    --follow'), the view to the status file 'fabricctl status' reads.

    \b
    Examples:
      fabricctl --election-id 10 run --metrics-port 9300
      fabricctl --election-id 5 run            # hot backup beside the one above
      fabricctl run --period 20 --fail-after 3 --restore-after 100 --gray-loss 0.05
      fabricctl run --endpoints /tmp/srv6-fabric-lab --loops /tmp/srv6-fabric-lab/loops/RUN
    """
    if probe_timeout < period:
        raise OpError(f"--probe-timeout ({probe_timeout:g} ms) must be at least --period ({period:g} ms)", BAD_INPUT)
    if carrier_events is not None and (problem := path_problem(carrier_events)) is not None:
        raise OpError(f"--carrier-events: {problem}", BAD_INPUT)
    if loops_dir is not None and endpoints_dir is None:
        raise OpError("--loops records the reports to push them: give --endpoints too", BAD_INPUT)
    topo = env.topo()
    try:
        thresholds = Thresholds(k, m, window, gray_loss, max_damping)
    except ValueError as e:
        raise OpError(str(e), BAD_INPUT) from None
    _refuse(click.get_current_context(), topo)
    state = env.state_path()
    config = Config(period=period / 1000, probe_timeout=probe_timeout / 1000, thresholds=thresholds,
                    election_id=env.election_id, connect_timeout=min(env.timeout, 5.0), metrics_port=metrics_port,
                    counters_every=counters_every, events=events_file, probe=not no_probe, nice=nice,
                    port_evidence=port_evidence, host_probes=host_probes, host_every=host_every,
                    switch_deadline=switch_deadline / 1000, ping_every=ping_every / 1000,
                    carrier_events=carrier_events)
    extra: dict[str, Any] = {}
    if endpoints_dir is not None:  # chosen once: the service pushes to this sink, whatever the data planes
        from fabricctl.denylist import EndpointPush, read_reports

        extra["endpoints"] = EndpointPush(endpoints_dir, endpoint_timeout)
        if loops_dir is not None:
            extra["reports"] = lambda: read_reports(loops_dir).failed
    if any(kind_of(sw) == "p4runtime" for sw in topo.switches):
        env.p4info()  # exit 5 with a hint when the artifacts are missing
    env.failures()  # exit 2 on an unreadable state file, before anything starts
    web = None
    if web_listen is not None:  # bound before anything starts, so a busy port is one line and nothing half-done
        from fabricctl.web import open_server, view_sources

        web = open_server(view_sources(env, None if env.store_url else events_file), web_listen, web_allow_remote,
                          "--web")
    if getattr(env, "store_url", None):  # the view then reads the fabric's store: any controller shows the leader's
        if web is not None:
            from fabricctl.web import announce

            web.start()
            click.echo(announce(web), err=True)
        try:
            _run_led(env, topo, state, config, lease_ttl, duration, extra)
        finally:
            if web is not None:
                web.close()
        return
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    lease = None
    if needs_lease(topo):  # namespaces elect no writer: one controller at a time holds them
        from controller.service.lease import ControllerLease

        lease = ControllerLease(state)
        try:
            if not lease.take():
                click.echo(f"standby: {lease.holder()}; taking over when it stops", err=True)
                if not lease.wait(stop):
                    if web is not None:
                        web.server_close()
                    return
        except OSError as e:
            raise OpError(f"cannot take the controller lease {lease.path}: {e.strerror or e}", BAD_INPUT) from None
    try:
        service = _service(env, topo, state, config, **extra)
    except BaseException:
        if web is not None:
            web.server_close()
        if lease is not None:
            lease.release()
        raise
    click.echo(f"running: {len(topo.switches)} switches, {len(service.prober.states) // 2} links, election id "
               f"{env.election_id}; events {service.events.path}" + (f"; metrics :{metrics_port}" if metrics_port else ""),
               err=True)
    if web is not None:
        from fabricctl.web import announce

        web.start()
        click.echo(announce(web), err=True)
    try:
        service.run_until(stop, duration)
    except OSError as e:
        raise OpError(f"cannot serve metrics on port {metrics_port}: {e.strerror or e}", BAD_INPUT) from None
    finally:
        if web is not None:
            web.close()
        if lease is not None:
            lease.release()


def _refuse(ctx: click.Context, topo: Any) -> None:
    """OpError naming the first option given that a switch's data plane cannot carry (its implementation says
    which, and why: `cannot`)."""
    given = [p.name for p in ctx.command.params
             if p.name and ctx.get_parameter_source(p.name) not in (ParameterSource.DEFAULT, None)]
    found = refused(topo, given)
    if found is not None:
        name, sw, why = found
        param = next(p for p in ctx.command.params if p.name == name)
        flag = max(param.opts, key=len) if param.opts else name
        raise OpError(f"{flag} cannot be used here: {sw.name} is a {handle_class(sw).kind} switch ({where(sw)}) and "
                      f"{why}", BAD_INPUT)


def _service(env: Any, topo: Any, state: Path, config: Config, **kw: Any) -> FabricService:
    """The service over the topology's switches; what cannot be opened (a file, a socket, a namespace) as one line."""
    try:
        return FabricService(topo, env.program, state, config, **kw)
    except OSError as e:
        raise OpError(f"cannot open the events file or the carrier socket: {e}", BAD_INPUT) from None
    except DataPlaneError as e:  # a switch's namespace that cannot be opened, probed or watched (one line naming it)
        raise OpError(str(e), SWITCH_ERROR) from None


@click.command("events")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events as they come (like tail -f).")
@click.option("--events", "events_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help=f"Events file [default: {EVENTS_NAME} next to the state file].")
@click.option("--kind", "kinds", multiple=True, metavar="KIND", help="Only events of this kind (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print each event as one JSON line.")
@click.pass_obj
def events_cmd(env: Any, follow: bool, events_file: Path | None, kinds: tuple[str, ...], as_json: bool) -> None:
    """Print the events of the running (or last) controller: links down/up with the probe
    evidence, failures recorded, deltas written, reconnects, mastership changes.

    \b
    Examples:
      fabricctl events
      fabricctl events --follow --kind link_down --kind link_up
      fabricctl events --json | jq .
    """
    if getattr(env, "store_url", None) and events_file is None:  # the fabric's stream in etcd, every controller's
        _store_events(env.store(), follow, kinds, as_json)
        return
    path = events_file or env.state_path().with_name(EVENTS_NAME)
    if not path.exists():
        raise OpError(f"no events file {path} ('fabricctl run' writes it)", BAD_INPUT)
    if not path.is_file():  # a directory, a FIFO (reading one would wait for a writer forever)
        raise OpError(f"{path} is not an events file (not a regular file)", BAD_INPUT)
    try:
        for event in read(path, follow=follow):
            if kinds and event.get("kind") not in kinds:
                continue
            click.echo(json.dumps(event) if as_json else _line(event))
    except KeyboardInterrupt:
        pass


def _line(event: dict[str, Any]) -> str:
    import time

    when = time.strftime("%H:%M:%S", time.localtime(event.get("t", 0))) + f".{int(event.get('t', 0) % 1 * 1000):03d}"
    rest = " ".join(f"{k}={v if not isinstance(v, (dict, list)) else json.dumps(v)}" for k, v in event.items()
                    if k not in ("t", "mono_ns", "kind", "pid", "t_mono_ns"))
    return f"{when} {event.get('kind')} {rest}".rstrip()


def _run_led(env: Any, topo: Any, state: Path, config: Config, ttl: int, duration: float,
             extra: dict[str, Any]) -> None:
    """`run` on an etcd store: leadership decides the election id (controller.service.ha)."""
    from controller.service.ha import run_led

    store = env.store()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    def make(cfg: Config, fence: Any, publish: Any, sink: Any) -> FabricService:
        return _service(env, topo, state, cfg, store=store, fence=fence, publish=publish, sink=sink, **extra)

    click.echo(f"running on {store}: {len(topo.switches)} switches; campaigning for leadership (lease TTL {ttl} s)",
               err=True)
    run_led(make, config, store, ttl, stop, duration, lambda line: click.echo(line, err=True))


def _store_events(store: Any, follow: bool, kinds: tuple[str, ...], as_json: bool) -> None:
    """Every event in the store, page by page, then (--follow) each new one; while the store cannot be read
    a follower says so once on stderr and goes on when it can (without --follow: the error, exit 1)."""
    import time

    from controller.state.store import StoreUnavailable

    after, waiting = 0, False
    try:
        while True:
            try:
                events, after = store.events_since(after)
            except StoreUnavailable as e:
                if not follow:
                    raise
                if not waiting:
                    click.echo(f"waiting for the store: {e}", err=True)
                waiting = True
                time.sleep(1.0)
                continue
            waiting = False
            for _, event in events:
                if not kinds or event.get("kind") in kinds:
                    click.echo(json.dumps(event) if as_json else _line(event))
            if not events:  # caught up
                if not follow:
                    return
                time.sleep(0.2)
    except KeyboardInterrupt:
        pass
