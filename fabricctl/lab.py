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
from controller import exitcodes, topofile
from fabricctl.options import Finite
from controller.exitcodes import OpError
from controller.model.topology import TopologyError
from controller.programs.toolchain import find_binary

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


def _lab_error(e: Exception, nodes: Any = None) -> OpError:
    """A LabError as one error line: exit 5 when the machine lacks what the nodes need, else 1."""
    from mininet_labs.backends import nodes_for

    why = (nodes if nodes is not None else nodes_for("bmv2")).why_not()
    return OpError(str(e), exitcodes.TOOLCHAIN if why else exitcodes.SWITCH_ERROR)


@click.group()
def lab() -> None:
    """Run the fabric as a lab: bmv2 switches under Mininet, or Linux SRv6 routers in namespaces.

    `lab up` starts one switch per switch of the topology (default 2 planes x 2 T1 x 2 T0 x 2
    hosts per T0) on the data plane --dataplane names (auto: bmv2 where simple_switch_grpc and
    Mininet are found, else the kernel's), hosts with one NIC per plane, and installs the plan;
    it keeps running until `lab down`. Every other lab command reads the data plane from the
    lab's state. The lab's topology file is DIR/topology.yaml, so every other fabricctl command
    drives the lab with --topology. Root is needed either way.

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
    from mininet_labs.backends import choose, nodes_for
    from mininet_labs.headless import start
    from mininet_labs.lab import Lab, LabError
    from mininet_labs.labstate import default_topology

    if topology_file is not None:
        model, problems = topofile.check_topology(topology_file)
        if model is None:
            raise OpError(f"topology {topology_file} is invalid: {problems[0]}", exitcodes.BAD_TOPOLOGY)
    else:
        try:
            model = default_topology(planes, t1, t0, hosts, grpc_base_port=grpc_base_port)
        except TopologyError as e:
            raise OpError(f"no such fabric: {e.problems[0]}", exitcodes.BAD_TOPOLOGY) from None
    kind, why = choose(dataplane)
    try:
        nodes = nodes_for(kind, pcap=pcap, log_level=log_level, tls=tls, cli=run_cli)  # refuses what it cannot carry
    except LabError as e:
        raise OpError(str(e)) from None
    too_big = nodes.size_problem(model)
    if too_big:
        raise OpError(too_big)
    if kind == "bmv2":  # the build the switches run, named; its port poll; watch ports where safe (docs/toolchain.md)
        from controller.programs.bmv2build import nonblocking_warning, traits
        from mininet_labs.bmv2proc import PORT_POLL_VARIABLE, lab_binary, port_poll_ms as poll_ms, with_watch_ports
        if port_poll_ms is not None:  # the lab's switches inherit it (also across `lab restart-switch`)
            os.environ[PORT_POLL_VARIABLE] = str(port_poll_ms)
        try:
            poll_ms()  # a bad $BM_PORT_MONITOR_MS: one line, nothing started
        except ValueError as e:
            raise OpError(str(e)) from None
        binary = lab_binary(log_level) or find_binary("simple_switch_grpc")
        if (warning := nonblocking_warning(binary)) is not None:  # a bmv2 a lost carrier stalls
            click.echo(warning, err=True)
        if binary is not None:
            build = traits(binary)
            click.echo(f"bmv2: {build.describe()}", err=True)
            model, off = with_watch_ports(model, build)
            if off is not None:
                click.echo(off, err=True)
    elif port_poll_ms is not None:
        raise OpError("--port-poll-ms: the kernel data plane has no port poll (bmv2's BM_PORT_MONITOR_MS)")
    _store_for(model.name)  # a bad --store URL: one line, nothing started
    store = getattr(ctx.find_root().obj, "store_url", None)  # the plan installed is the store's record
    opts = dict(tag=tag, **_global(ctx))
    try:
        if run_cli:
            running = _with_store(Lab(model, lab_dir, nodes, **opts))
            try:
                running.up(install=not no_install)
                _print_up(running, why, as_json)
                running.cli()
            finally:
                running.down()
            return
        attached = _with_store(start(model, lab_dir, nodes, install=not no_install, store=store, **opts))
    except LabError as e:
        raise _lab_error(e, nodes) from None
    _print_up(attached, why, as_json)


def _print_up(running: Any, why: str, as_json: bool) -> None:
    st = running.state
    if as_json:
        click.echo(json.dumps(running.status(), indent=2))
        return
    click.echo(f"lab up in {st.timings.get('up_s', 0):.1f}s on the {st.dataplane} data plane ({why}): "
               f"{len(st.switches)} switches, {len(st.hosts)} hosts, {running.program} "
               f"({', '.join(f'{k} {v}s' for k, v in st.timings.items() if k != 'up_s')})")
    click.echo(f"  dir: {st.lab_dir} (switch logs <switch>.txt, state {Path(st.lab_dir).name}/lab-state.json)")
    tls = running.model.switches[0].tls if running.model.switches else None
    if tls is not None:
        click.echo(f"  P4Runtime: {tls.describe()}; the CA, switch and client certificates in {tls.ca.parent}")
    for name in running.hosts:
        nics = ", ".join(f"{n.intf} {n.v6}" for n in running.host(name).nics)
        click.echo(f"  {name}: {nics}")
    if st.namespaces:
        leaf = running.model.switches[-1].name
        click.echo(f"  ip netns exec {running.netns_of(leaf)} ip -6 route      # a switch's routes")
    click.echo(f"  export FABRIC_TOPOLOGY={running.topology_path}   # fabricctl status / fail / restore on the lab")
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

    try:
        report = cleanup(lab_dir)
    except LabError as e:
        raise OpError(str(e)) from None
    if as_json:
        click.echo(json.dumps({"clean": report.clean, "killed": report.killed, "deleted_intfs": report.deleted_intfs,
                               "leftover_pids": report.leftover_pids, "leftover_intfs": report.leftover_intfs}))
    elif report.clean:
        click.echo(f"lab down: {len(report.killed)} processes stopped, {len(report.deleted_intfs)} {report.what} "
                   f"removed; logs kept in {lab_dir}")
    if not report.clean:
        raise OpError(f"lab down left {len(report.leftover_pids)} processes ({report.leftover_pids[:5]}) and "
                      f"{len(report.leftover_intfs)} {report.what} ({report.leftover_intfs[:5]})",
                      exitcodes.SWITCH_ERROR)


@lab.command("status")
@_dir_option
@click.option("--check", is_flag=True, help="Also read every switch and compare it with the plan.")
@_json_option
@click.pass_context
def status(ctx: click.Context, lab_dir: Path, check: bool, as_json: bool) -> None:
    """The lab's processes, hosts and (with --check) whether each switch holds its plan.

    Exit 1 if a switch or host process is gone, or (with --check) a switch does not hold its plan.

    \b
    Examples:
      fabricctl lab status
      fabricctl lab status --check --json
    """
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
        nodes = running.nodes
        click.echo(f"lab {doc['lab_dir']}: {doc['phase']}, {doc['dataplane']} data plane, {nodes.summary(doc)}")
        for b in doc["bmv2"]:
            poll = f"every {b['port_poll_ms']} ms" if b["port_poll_ms"] else "bmv2's default (200 ms)"
            click.echo(f"  bmv2: {b['build']} build {b['binary']}, port poll {poll}")
        for n, s in doc["switches"].items():
            plan = doc.get("plan", {}).get(n)
            sync = "" if plan is None else ("  in sync" if plan.get("in_sync") else f"  {plan}")
            click.echo(f"  {n}: {nodes.where(n, s)} {'up' if s['alive'] else 'DOWN'}{sync}")
        for n, h in doc["hosts"].items():
            click.echo(f"  {n}: {nodes.where(n, h)} {'up' if h['alive'] else 'DOWN'}; " + "; ".join(h["nics"]))
        for what in doc.get("faults", []):
            click.echo(f"  fault: {what}")
    if dead or any("error" in p or not p.get("in_sync") for p in doc.get("plan", {}).values()):
        raise click.exceptions.Exit(exitcodes.SWITCH_ERROR)


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
                                 verb=verb, plane_mode=plane_mode,
                                 planes=None if not planes else [int(p) for p in planes.split(",")], rate=rate)
    except LabError as e:
        raise OpError(str(e), exitcodes.SWITCH_ERROR) from None
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
        raise click.exceptions.Exit(exitcodes.SWITCH_ERROR)


def _attach(lab_dir: Path) -> Any:
    """The lab in lab_dir, on the data plane its state names, with fabricctl's --store."""
    from mininet_labs.lab import Lab, LabError

    try:
        return _with_store(Lab.attach(lab_dir))
    except LabError as e:
        raise OpError(str(e), exitcodes.SWITCH_ERROR) from None


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


