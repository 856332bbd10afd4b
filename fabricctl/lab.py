"""`fabricctl lab`: run a Mininet lab of the fabric (up, down, status, traffic).

Nothing here imports Mininet at module level: fabricctl loads this group for every command,
and only `lab` commands need Mininet (and root, and simple_switch_grpc).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from controller.model import limits
from controller import ops
from fabricctl.options import Finite
from controller.ops import OpError
from controller.model.topology import TopologyError
from controller.programs.toolchain import find_binary
from fabricctl import kernel_lab

DEFAULT_DIR = "/tmp/srv6-fabric-lab"  # mininet_labs.lab.DEFAULT_DIR (not imported: keep this module light)


def _dir_option(f: Any) -> Any:
    return click.option("--dir", "lab_dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DIR,
                        show_default=True, envvar="FABRIC_LAB_DIR", help="The lab directory (env FABRIC_LAB_DIR).")(f)


def _json_option(f: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(f)


def _global(ctx: click.Context) -> dict[str, Any]:
    """fabricctl's global options that apply to a lab (program, election id, timeout)."""
    env = ctx.find_root().obj
    return {"program": getattr(env, "program", "srv6_spray"), "election_id": getattr(env, "election_id", 1),
            "timeout": getattr(env, "timeout", 10.0)}


def _lab_error(e: Exception) -> OpError:
    from mininet_labs.lab import prerequisites

    return OpError(str(e), ops.TOOLCHAIN if prerequisites() else ops.SWITCH_ERROR)


@click.group()
def lab() -> None:
    """Run the fabric as a Mininet lab of bmv2 switches (root, Mininet, simple_switch_grpc).

    `lab up` starts one switch per switch of the topology (default 2 planes x 2 T1 x 2 T0 x 2
    hosts per T0), hosts with one NIC per plane, pushes the pipelines and installs the plan;
    it keeps running in the background until `lab down`. The lab's topology file is
    DIR/topology.yaml, so every other fabricctl command drives the lab with --topology.

    \b
    Examples:
      fabricctl lab up                         # default size, in the background
      fabricctl lab up --planes 4 --hosts 1    # another size
      fabricctl lab up examples/two_plane_lab.yaml --cli   # the Mininet CLI; exit tears down
      fabricctl lab traffic                    # RoCEv2 between every host pair, every plane
      fabricctl --topology /tmp/srv6-fabric-lab/topology.yaml fail link p0-t0-0 p0-t1-1
      fabricctl lab status
      fabricctl lab down
    """


@lab.command("up")
@click.argument("topology_file", metavar="[TOPOLOGY]", required=False,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--planes", type=click.IntRange(1, 16), default=2, show_default=True)
@click.option("--t1", type=click.IntRange(1, limits.MAX_SPINES), default=2, show_default=True, help="Spines per plane.")
@click.option("--t0", type=click.IntRange(1, limits.MAX_LEAVES), default=2, show_default=True, help="Leaves per plane.")
@click.option("--hosts", type=click.IntRange(1, limits.MAX_HOSTS_PER_LEAF), default=2, show_default=True,
              help="Hosts per leaf.")
@click.option("--grpc-base-port", type=click.IntRange(1, 55000), default=50001, show_default=True,
              help="gRPC port of the first switch (the others follow; thrift ports are 10000 above).")
@_dir_option
@click.option("--tag", default="", help="Prefix of the lab's interface names, to run two labs side by side.")
@click.option("--pcap", is_flag=True, help="Write a pcap per switch port under DIR/pcap.")
@click.option("--log-level", type=click.Choice(["trace", "debug", "info", "warn", "error", "off"]), default="warn",
              show_default=True, help="bmv2's log level (DIR/<switch>.txt); 'debug' logs every packet.")
@click.option("--no-install", is_flag=True, help="Start switches and hosts only: no pipeline, no plan.")
@click.option("--tls", is_flag=True, help="Start the switches with mutual TLS on P4Runtime: a CA, switch and client "
              "certificate made with openssl in DIR/tls, named by the lab's topology.yaml.")
@click.option("--cli", "run_cli", is_flag=True, help="Run in this process and open the Mininet CLI; leaving it "
              "tears the lab down.")
@click.option("--dataplane", type=click.Choice(["auto", "kernel", "bmv2"]), default="auto", show_default=True,
              help="bmv2 switches, or Linux SRv6 routers in namespaces (docs/kernel.md); auto: bmv2 where "
              "simple_switch_grpc is found, else kernel.")
@click.option("--port-poll-ms", type=click.IntRange(1, 60000), default=None, metavar="MS",
              help="How often each bmv2 switch reads its ports' carrier (BM_PORT_MONITOR_MS; default "
              "$BM_PORT_MONITOR_MS, else 10): the delay of switch-local failover (docs/performance.md).")
@_json_option
@click.pass_context
def up(ctx: click.Context, topology_file: Path | None, planes: int, t1: int, t0: int, hosts: int, grpc_base_port: int,
       lab_dir: Path, tag: str, pcap: bool, log_level: str, no_install: bool, tls: bool, run_cli: bool,
       dataplane: str, port_poll_ms: int | None, as_json: bool) -> None:
    """Start a lab: of TOPOLOGY (a topology YAML), or of the size the options give.

    In the background by default: it prints the hosts' addresses and returns once every switch
    holds its plan; `lab down` stops it. With --cli it runs in this process and leaving the
    Mininet CLI tears it down. Global options apply: --program, --election-id, --timeout.

    \b
    Examples:
      fabricctl lab up
      fabricctl lab up --planes 4 --t1 2 --t0 3 --hosts 1 --dir /tmp/lab4
      fabricctl --program eecmp_qp_hash lab up examples/two_plane_lab.yaml --cli
      fabricctl lab up --pcap --log-level debug      # pcaps and per-packet logs in DIR
      fabricctl lab up --tls                         # P4Runtime with mutual TLS
    """
    from mininet_labs.headless import start_headless
    from mininet_labs.lab import Lab, LabError, default_topology, size_problem

    if topology_file is not None:
        model, problems = ops.check_topology(topology_file)
        if model is None:
            raise OpError(f"topology {topology_file} is invalid: {problems[0]}", ops.BAD_TOPOLOGY)
    else:
        try:
            model = default_topology(planes, t1, t0, hosts, grpc_base_port=grpc_base_port)
        except TopologyError as e:
            raise OpError(f"no such fabric: {e.problems[0]}", ops.BAD_TOPOLOGY) from None
    kind, why = kernel_lab.choose(dataplane)
    if kind == "kernel":
        return kernel_lab.up(model, lab_dir, tag, not no_install, as_json, _global(ctx)["program"], why,
                             {"--pcap": pcap, "--tls": tls, "--cli": run_cli}, _store_for(model.name))
    too_big = size_problem(model)
    if too_big:
        raise OpError(too_big)
    # --- the bmv2 build the switches run (mininet_labs.bmv2proc): named, its port poll, watch ports where safe
    from controller.programs.bmv2build import nonblocking_warning, traits  # docs/toolchain.md
    from mininet_labs.bmv2proc import PORT_POLL_VARIABLE, lab_binary, port_poll_ms as poll_ms, with_watch_ports
    if port_poll_ms is not None:  # the lab's switches inherit it (also across `lab restart-switch`)
        os.environ[PORT_POLL_VARIABLE] = str(port_poll_ms)
    try:
        poll_ms()  # a bad $BM_PORT_MONITOR_MS: one line, nothing started
    except ValueError as e:
        raise OpError(str(e)) from None
    binary = lab_binary(log_level) or find_binary("simple_switch_grpc")
    if (warning := nonblocking_warning(binary)) is not None:
        click.echo(warning, err=True)
    if binary is not None:
        build = traits(binary)
        click.echo(f"bmv2: {build.describe()}", err=True)
        model, off = with_watch_ports(model, build)
        if off is not None:
            click.echo(off, err=True)
    # --- end of the bmv2 build
    opts = dict(tag=tag, pcap=pcap, log_level=log_level, tls=tls, **_global(ctx))
    _store_for(model.name)  # a bad --store URL: one line, nothing started
    store = getattr(ctx.find_root().obj, "store_url", None)  # the plan installed is the store's record
    try:
        if run_cli:
            running = _with_store(Lab(model, lab_dir, **opts))  # type: ignore[arg-type]
            try:
                running.up(install=not no_install)
                _print_up(running, as_json)
                running.cli()
            finally:
                running.down()
            return
        attached = _with_store(start_headless(model, lab_dir, install=not no_install, store=store,  # type: ignore[arg-type]
                                              **opts))
    except LabError as e:
        raise _lab_error(e) from None
    _print_up(attached, as_json)


def _print_up(running: Any, as_json: bool) -> None:
    st = running.state
    if as_json:
        click.echo(json.dumps(running.status(), indent=2))
        return
    n_sw, n_h = len(st.switches), len(st.hosts)
    click.echo(f"lab up in {st.timings.get('up_s', 0):.1f}s: {n_sw} switches, {n_h} hosts, {running.program} "
               f"({', '.join(f'{k} {v}s' for k, v in st.timings.items() if k != 'up_s')})")
    click.echo(f"  dir: {st.lab_dir} (switch logs <switch>.txt, state {Path(st.lab_dir).name}/lab-state.json)")
    tls = running.model.switches[0].tls if running.model.switches else None
    if tls is not None:
        click.echo(f"  P4Runtime: {tls.describe()}; the CA, switch and client certificates in {tls.ca.parent}")
    for name in running.hosts:
        nics = ", ".join(f"{n.intf} {n.v6}" for n in running.host(name).nics)
        click.echo(f"  {name}: {nics}")
    click.echo(f"  export FABRIC_TOPOLOGY={running.topology_path}   # fabricctl status / fail / restore on the lab")
    if running.net is None:
        click.echo("  next: fabricctl lab traffic; fabricctl lab down")


@lab.command("down")
@_dir_option
@_json_option
def down(lab_dir: Path, as_json: bool) -> None:
    """Stop the lab in DIR and remove every process and interface it made (also after a crash).

    Stops the lab's process, then anything still carrying the lab's mark (host shells, whose
    namespaces and veths go with them, switches, commands run in hosts) and the switch-port
    interfaces the lab names. Nothing else is touched; logs stay in DIR. Exit 1 if something
    of the lab's is left.

    \b
    Example:
      fabricctl lab down --dir /tmp/srv6-fabric-lab
    """
    from mininet_labs.lab import LabError, cleanup

    if kernel_lab.is_kernel(lab_dir):
        return kernel_lab.down(lab_dir, as_json)
    try:
        report = cleanup(lab_dir)
    except LabError as e:
        raise OpError(str(e)) from None
    if as_json:
        click.echo(json.dumps({"clean": report.clean, "killed": report.killed, "deleted_intfs": report.deleted_intfs,
                               "leftover_pids": report.leftover_pids, "leftover_intfs": report.leftover_intfs}))
    elif report.clean:
        click.echo(f"lab down: {len(report.killed)} processes stopped, {len(report.deleted_intfs)} stray interfaces "
                   f"removed; logs kept in {lab_dir}")
    if not report.clean:
        raise OpError(f"lab down left {len(report.leftover_pids)} processes ({report.leftover_pids[:5]}) and "
                      f"{len(report.leftover_intfs)} interfaces ({report.leftover_intfs[:5]})", ops.SWITCH_ERROR)


@lab.command("status")
@_dir_option
@click.option("--check", is_flag=True, help="Also read every switch and compare it with the plan.")
@_json_option
@click.pass_context
def status(ctx: click.Context, lab_dir: Path, check: bool, as_json: bool) -> None:
    """The lab's processes, hosts and (with --check) whether each switch holds its plan.

    Exit 1 if a switch or host process is gone.

    \b
    Examples:
      fabricctl lab status
      fabricctl lab status --check --json
    """
    if kernel_lab.is_kernel(lab_dir):
        return kernel_lab.status(lab_dir, check, as_json, _with_store)
    running = _attach(lab_dir)
    doc = running.status()
    if check:
        outcomes = running.install(dry_run=True, push="never")
        doc["plan"] = {n: ({"in_sync": not o.delta, "missing": len(o.delta.inserts), "extra": len(o.delta.deletes),
                            "differing": len(o.delta.modifies)} if o.ok and o.delta is not None else {"error": o.error})
                       for n, o in outcomes.items()}
    dead = [n for n, s in doc["switches"].items() if not s["alive"]] + [n for n, h in doc["hosts"].items() if not h["alive"]]
    from mininet_labs.bmv2proc import lab_builds  # which bmv2 build the switches run
    doc["bmv2"] = lab_builds(doc["switches"])
    if as_json:
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(f"lab {doc['lab_dir']}: {doc['phase']}, pid {doc['pid']} {'alive' if doc['pid_alive'] else 'gone'}, "
                   f"{doc['intfs_present']}/{doc['intfs']} switch ports present")
        for b in doc["bmv2"]:
            poll = f"every {b['port_poll_ms']} ms" if b["port_poll_ms"] else "bmv2's default (200 ms)"
            click.echo(f"  bmv2: {b['build']} build {b['binary']}, port poll {poll}")
        for n, s in doc["switches"].items():
            plan = doc.get("plan", {}).get(n)
            sync = "" if plan is None else ("  in sync" if plan.get("in_sync") else f"  {plan}")
            click.echo(f"  {n}: pid {s['pid']} {'up' if s['alive'] else 'DOWN'}, {s['grpc']} device {s['device_id']}{sync}")
        for n, h in doc["hosts"].items():
            click.echo(f"  {n}: pid {h['pid']} {'up' if h['alive'] else 'DOWN'}; " + "; ".join(h["nics"]))
        for what in doc.get("faults", []):
            click.echo(f"  fault: {what}")
    if dead:
        raise click.exceptions.Exit(ops.SWITCH_ERROR)


def _switch_fault(lab_dir: Path, act: Any) -> Any:
    """act(lab) on the lab in lab_dir, its LabError as one error line."""
    from mininet_labs.lab import LabError

    try:
        return act(_attach(lab_dir))
    except LabError as e:
        raise _lab_error(e) from None


@lab.command("kill-switch")
@click.argument("name", metavar="SWITCH")
@_dir_option
@_json_option
def kill_switch(name: str, lab_dir: Path, as_json: bool) -> None:
    """SIGKILL a lab switch (a crash, for fault tests): its streams break, its tables are gone.

    \b
    Example:
      fabricctl lab kill-switch p0-t1-1 && fabricctl lab restart-switch p0-t1-1
    """
    pid = _switch_fault(lab_dir, lambda running: running.kill_switch(name))
    if as_json:
        click.echo(json.dumps({"switch": name, "killed": pid}))
    else:
        click.echo(f"{name}: " + (f"killed pid {pid}" if pid else "was not running"))


@lab.command("restart-switch")
@click.argument("name", metavar="SWITCH")
@_dir_option
@_json_option
def restart_switch(name: str, lab_dir: Path, as_json: bool) -> None:
    """Start a lab switch again the way the lab started it (killing it first if it runs).

    It comes back with no pipeline and empty tables: a running 'fabricctl run' pushes both, or run
    'fabricctl install SWITCH'.

    \b
    Example:
      fabricctl lab restart-switch p0-t1-1
    """
    pid = _switch_fault(lab_dir, lambda running: running.restart_switch(name))
    if as_json:
        click.echo(json.dumps({"switch": name, "pid": pid}))
    else:
        click.echo(f"{name}: running again, pid {pid} (no pipeline, empty tables)")


@lab.command("traffic")
@_dir_option
@click.option("--pair", "pairs", nargs=2, multiple=True, metavar="SRC DST",
              help="A sender and a receiver (repeatable; default: every ordered pair of hosts).")
@click.option("--qps", type=click.IntRange(1), default=4, show_default=True, help="QPs per sender and destination.")
@click.option("--messages", type=click.IntRange(1), default=8, show_default=True,
              help="Messages per destination, round-robined over the QPs.")
@click.option("--message-size", type=click.IntRange(1), default=1024, show_default=True)
@click.option("--mtu", type=click.IntRange(64), default=1024, show_default=True, help="Payload bytes per packet.")
@click.option("--verb", type=click.Choice(["send", "write"]), default="send", show_default=True)
@click.option("--plane-mode", type=click.Choice(["packet", "qp"]), default="packet", show_default=True,
              help="Choose the plane per packet (round-robin) or per QP.")
@click.option("--planes", help="Comma-separated planes to use (default: all).")
@click.option("--rate", type=Finite(0), default=1000.0, show_default=True,
              help="Packets per second per sender (0: unpaced).")
@_json_option
def traffic(lab_dir: Path, pairs: tuple[tuple[str, str], ...], qps: int, messages: int, message_size: int, mtu: int,
            verb: str, plane_mode: str, planes: str | None, rate: float, as_json: bool) -> None:
    """Send RoCEv2 RC traffic between lab hosts and report, per pair and plane, what arrived.

    One sender per source host and one receiver per destination run in the hosts' namespaces;
    each receiver checks every ICRC and counts per sender and QP. Exit 1 when a packet was
    lost or duplicated, or arrived with a bad ICRC or on another plane.

    \b
    Examples:
      fabricctl lab traffic                              # every ordered host pair
      fabricctl lab traffic --pair h0 h3 --pair h3 h0 --qps 16 --messages 256
      fabricctl lab traffic --verb write --message-size 4096 --plane-mode qp --json
    """
    from mininet_labs.lab import LabError

    running = _attach(lab_dir)
    try:
        report = running.traffic(list(pairs) or None, qps=qps, messages=messages, message_size=message_size, mtu=mtu,
                                 verb=verb, plane_mode=plane_mode,  # type: ignore[arg-type]
                                 planes=None if not planes else [int(p) for p in planes.split(",")], rate=rate)
    except LabError as e:
        raise OpError(str(e), ops.SWITCH_ERROR) from None
    except ValueError as e:
        raise OpError(str(e)) from None
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        t = report.totals()
        click.echo(f"traffic: {t['sent']} sent, {t['received']} received, {t['lost']} lost, {t['duplicated']} duplicated, "
                   f"{t['reordered']} reordered, {t['icrc_bad']} bad ICRC in {report.seconds:.1f}s")
        for p in report.pairs():
            mark = "ok" if p.received == p.sent else "LOSS"
            click.echo(f"  {p.src} -> {p.dst} plane {p.plane}: {p.received}/{p.sent} {mark}")
        for line in report.problems():
            click.echo(f"error: {line}", err=True)
    if not report.ok:
        raise click.exceptions.Exit(ops.SWITCH_ERROR)


# --- scenarios ---------------------------------------------------------------------------------

def _schedule_options(f: Any) -> Any:
    for opt in reversed([
        click.option("--rate", type=Finite(1), default=400.0, show_default=True,
                     help="Packets per second per sender (bmv2 on two cores: a few hundred)."),
        click.option("--qps", type=click.IntRange(1), default=4, show_default=True, help="QPs per host pair."),
        click.option("--seconds", type=Finite(1), default=5.0, show_default=True, help="Traffic duration."),
        click.option("--fail-at", type=Finite(0), default=1.5, show_default=True,
                     help="Seconds after the senders start that the failure happens."),
        click.option("--restore-at", type=Finite(0), default=3.0, show_default=True,
                     help="Seconds after the senders start that it is repaired."),
        click.option("--png", type=click.Path(dir_okay=False, path_type=Path),
                     help="Plot delivered packets per plane over time to this PNG (needs matplotlib)."),
    ]):
        f = opt(f)
    return _json_option(_dir_option(f))


def _attach(lab_dir: Path) -> Any:
    from mininet_labs.lab import Lab, LabError

    if kernel_lab.is_kernel(lab_dir):
        return _with_store(kernel_lab.attach(lab_dir))
    try:
        return _with_store(Lab.attach(lab_dir))
    except LabError as e:
        raise OpError(str(e), ops.SWITCH_ERROR) from None


def _with_store(running: Any) -> Any:
    """The lab with the record kept where fabricctl's --store (FABRIC_STORE) says: its failures, fail and
    restore then read and change that store, as `fabricctl fail/restore` do (default: the lab's state file)."""
    running.store = _store_for(running.model.name)
    return running


def _store_for(fabric: str) -> Any:
    """The store --store names for this fabric (StoreError, one line, on a bad URL), None: the lab's state file."""
    ctx = click.get_current_context(silent=True)
    env = ctx.find_root().obj if ctx is not None else None
    url = getattr(env, "store_url", None)
    if not url:
        return None
    from controller.state.backends import open_store

    return open_store(url, None, fabric, timeout=getattr(env, "timeout", 5.0))


def _run_scenario(lab_dir: Path, run: Any, seconds: float, fail_at: float, restore_at: float, rate: float, qps: int,
                  png: Path | None, as_json: bool) -> None:
    from mininet_labs import scenarios
    from mininet_labs.lab import LabError

    if not 0 < fail_at < restore_at < seconds:
        raise OpError(f"need 0 < --fail-at ({fail_at}) < --restore-at ({restore_at}) < --seconds ({seconds})")
    running = _attach(lab_dir)
    schedule = scenarios.Schedule(seconds=seconds, fail_at=fail_at, restore_at=restore_at, rate=rate, qps=qps)
    try:
        result = run(running, schedule)
    except LabError as e:
        raise OpError(str(e), ops.SWITCH_ERROR) from None
    doc = result.to_json()
    _plot("timeline", doc, png)
    click.echo(json.dumps(doc, indent=1) if as_json else "\n".join(scenarios.describe(result)))
    if png is not None and not as_json:
        click.echo(f"  plot: {png}")
    s = result.summary()
    if s["lost_elsewhere"] or not s["tables_ok"] or s["uplink_recovered"] is False:
        raise click.exceptions.Exit(ops.SWITCH_ERROR)


def _plot(kind: str, doc: dict[str, Any], png: Path | None) -> None:
    if png is None:
        return
    from mininet_labs import plot

    try:
        getattr(plot, kind)(doc, png)
    except plot.PlotUnavailable as e:
        raise OpError(str(e), ops.TOOLCHAIN) from None


@lab.group("fail-scenario")
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
def fail_link_scenario(t0: str, t1: str, lab_dir: Path, rate: float, qps: int, seconds: float, fail_at: float,
                       restore_at: float, png: Path | None, as_json: bool) -> None:
    """A T0-T1 link down mid-traffic, then restored.

    \b
    Example:
      fabricctl lab fail-scenario link p0-t0-0 p0-t1-1 --png link.png
    """
    from mininet_labs import scenarios

    _run_scenario(lab_dir, lambda lab, sch: scenarios.link_failure(lab, t0, t1, schedule=sch), seconds, fail_at,
                  restore_at, rate, qps, png, as_json)


@fail_scenario.command("switch")
@click.argument("name")
@_schedule_options
def fail_switch_scenario(name: str, lab_dir: Path, rate: float, qps: int, seconds: float, fail_at: float,
                         restore_at: float, png: Path | None, as_json: bool) -> None:
    """Every link of a T1 down mid-traffic, then restored (the spine is not contacted while down).

    \b
    Example:
      fabricctl lab fail-scenario switch p0-t1-1 --json > switch.json
    """
    from mininet_labs import scenarios

    _run_scenario(lab_dir, lambda lab, sch: scenarios.switch_failure(lab, name, schedule=sch), seconds, fail_at,
                  restore_at, rate, qps, png, as_json)


@lab.command("cross-plane")
@click.argument("host")
@click.option("--plane", type=click.IntRange(0), default=0, show_default=True, help="The plane whose NIC goes down.")
@_schedule_options
def cross_plane_cmd(host: str, plane: int, lab_dir: Path, rate: float, qps: int, seconds: float, fail_at: float,
                    restore_at: float, png: Path | None, as_json: bool) -> None:
    """A host's NIC into one plane goes down mid-traffic: its QPs move to the other planes.

    The host's sender sees the carrier go and re-homes that plane's QPs; senders towards the host
    are told when the lab records the failure (`fabricctl fail port`). The NIC then comes back and
    the QPs return. Exit 1 if a QP of another plane lost packets.

    \b
    Example:
      fabricctl lab cross-plane h0 --plane 0 --png cross.png
    """
    from mininet_labs import scenarios

    _run_scenario(lab_dir, lambda lab, sch: scenarios.cross_plane(lab, host, plane, schedule=sch), seconds, fail_at,
                  restore_at, rate, qps, png, as_json)


@lab.command("balance")
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
        raise OpError(str(e), ops.SWITCH_ERROR) from None
    doc = result.to_json()
    _plot("balance", doc, png)
    click.echo(json.dumps(doc, indent=1) if as_json else "\n".join(result.table()))
    if png is not None and not as_json:
        click.echo(f"  plot: {png}")


lab.add_command(kernel_lab.demo)
