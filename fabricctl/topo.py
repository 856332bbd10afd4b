"""Show or check the topology file: `fabricctl topo show|validate`."""

from __future__ import annotations


import click

from controller import exitcodes, topofile
from controller.model import lookup
from controller.model.topology import Topology, to_dict
from fabricctl.context import Env, _json_option, _print_json, _table


@click.group()
def topo() -> None:
    """Show or check the topology file (--topology or FABRIC_TOPOLOGY).

    \b
    Examples:
      fabricctl --topology examples/two_plane_lab.yaml topo validate
      fabricctl --topology examples/two_plane_lab.yaml topo show p0-t0-0
    """


@topo.command("show")
@click.argument("switch_names", metavar="[SWITCH]...", nargs=-1)
@_json_option
@click.pass_obj
def topo_show(env: Env, switch_names: tuple[str, ...], as_json: bool) -> None:
    """Print the fabric: one line per switch, or every port of the named switches.

    \b
    Examples:
      fabricctl --topology examples/two_plane_lab.yaml topo show
      fabricctl topo show p0-t0-0          # its hosts and uplinks, port by port
      fabricctl topo show --json           # the topology document (as YAML reads it)
    """
    t = env.topo()
    chosen = lookup.switches(t, switch_names) if switch_names else list(t.switches)
    if as_json:
        doc = to_dict(t)
        names = {s.name for s in chosen}
        doc["switches"] = [s for s in doc["switches"] if s["name"] in names]
        _print_json(doc)
        return
    click.echo(_summary(t))
    rows = [("switch", "role", "plane", "index", "device", "grpc | netns", "mac", "ports")]
    for s in chosen:
        ports = (f"{len(s.host_ports)} hosts, {len(s.uplinks)} uplinks" if s.role == "t0"
                 else f"{len(s.downlinks)} downlinks")
        rows.append((s.name, s.role, str(s.plane), str(s.index), str(s.device_id),
                     s.grpc_addr if s.netns is None else f"netns {s.netns}", s.mac, ports))
    _table(rows)
    if switch_names:
        for s in chosen:
            click.echo(f"{s.name}:")
            for k, (host, port) in enumerate(zip(s.host_names, s.host_ports)):
                click.echo(f"  slot {k}: port {port} -> host {host} ({t.host_mac(s, k)})")
            for j, port in enumerate(s.uplinks):
                click.echo(f"  uplink: port {port} -> {t.t1(s.plane, j).name}")
            for i, port in enumerate(s.downlinks):
                click.echo(f"  downlink: port {port} -> {t.t0(s.plane, i).name}")


def _summary(t: Topology) -> str:
    n_t1 = sum(1 for s in t.switches if s.role == "t1")
    links = sum(len(s.uplinks) for s in t.switches)
    return (f"{t.name}: {t.planes} planes, {n_t1} t1 + {len(t.switches) - n_t1} t0 switches, {len(t.hosts)} hosts, "
            f"{links} links, uSID block {t.usid_block or 'fcbb:bb00::/32 (default)'}")


@topo.command("validate")
@_json_option
@click.pass_obj
def topo_validate(env: Env, as_json: bool) -> None:
    """Check the topology file and report every problem, one `error:` line each (exit 3).

    Checks the YAML, every switch, port, link and host, the uSID block and the plan's
    capacity, and that each gRPC address is host:port or unix:/path.

    \b
    Examples:
      fabricctl --topology examples/two_plane_lab.yaml topo validate
      fabricctl --topology lab.yaml topo validate --json   # {"ok": ..., "problems": [...]}
    """
    path = env.topology_path()
    t, problems = topofile.check_topology(path)
    if t is not None:
        topofile.with_tls(t, env.tls)  # the TLS files: an `error:` line and exit 2 if one cannot be used
    if as_json:
        _print_json({"topology": str(path), "ok": t is not None, "problems": problems,
                     **({"summary": _summary(t)} if t is not None else {})})
    elif t is None:
        for p in problems:
            click.echo(f"error: {path}: {p}", err=True)
    else:
        click.echo(f"ok: {_summary(t)}")
    if t is None:
        raise click.exceptions.Exit(exitcodes.BAD_TOPOLOGY)
