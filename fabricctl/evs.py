"""fabricctl evs: export each host's EVs (uSID carriers per destination) for endpoint mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from controller import planning
from controller.model import lookup
from controller.files.atomic import write_atomic
from controller.plan.evs import export as export_evs, profiles
from controller.exitcodes import OpError


@click.command("evs")
@click.argument("host_names", metavar="[HOST]...", nargs=-1)
@click.option("--export", "export", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE",
              help="Write the EV export as JSON to FILE ('-': stdout), the file `python3 -m endpoint` reads.")
@click.option("--healthy", is_flag=True, help="As if nothing had failed (ignore the state file).")
@click.option("--profile", is_flag=True, help="Show the EV profiles instead: per destination and plane the fields "
              "(width, init_val, min/max, mask) the EVs expand by into their carriers, and the live EVs' values.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_obj
def evs(env: Any, host_names: tuple[str, ...], export: str | None, healthy: bool, profile: bool, as_json: bool) -> None:
    """List each host's entropy values (EVs) per destination: one uSID carrier per plane and spine.

    In endpoint mode hosts write the outer IPv6 header themselves, towards the carrier of an EV
    (block | spine uN | destination leaf uN | End.DT6), the same carriers the plan gives the leaves;
    the plan's health (the state file, unless --healthy) leaves out the EVs of failed paths.

    \b
    Examples:
      fabricctl evs h0
      fabricctl evs --json | jq '.hosts.h0.h2[].carrier'
      fabricctl evs --healthy --export evs.json
      fabricctl evs h0 --profile
    """
    t = env.topo()
    unknown = [h for h in host_names if h not in t.hosts]
    if unknown:
        raise lookup.unknown("host", unknown[0], sorted(t.hosts))
    fabric = planning.fabric(t, "srv6_spray", () if healthy else env.failures())
    if profile:
        if export is not None:
            raise OpError("--profile and --export do not go together (the export is what `python3 -m endpoint` reads)")
        _profiles(fabric, list(host_names) or list(t.hosts), as_json)
        return
    doc = export_evs(fabric, list(host_names) or None)
    if export is not None:
        text = json.dumps(doc, indent=1)
        if export == "-":
            click.echo(text)
            return
        try:
            write_atomic(Path(export), text + "\n")
        except OSError as e:
            raise OpError(f"cannot write {export}: {e.strerror or e}") from None
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    for host, dsts in doc["hosts"].items():
        for dst, evs_ in dsts.items():
            click.echo(f"{host} -> {dst}: {len(evs_)} EVs")
            for e in evs_:
                click.echo(f"  ev {e['id']:#06x} plane {e['plane']} via {e['spine_name']}: {e['src']} -> {e['carrier']}")
    if export:
        click.echo(f"exported to {export}")


def _profiles(fabric: Any, hosts: list[str], as_json: bool) -> None:
    doc = {h: profiles(fabric, h) for h in hosts}
    if as_json:
        click.echo(json.dumps(doc, indent=1))
        return
    for host, dsts in doc.items():
        for dst, planes in dsts.items():
            for plane, p in planes.items():
                click.echo(f"{host} -> {dst} plane {plane}: {len(p['evs'])} EVs, format widths {p['widths']}")
                for i, f in enumerate(p["fields"]):
                    click.echo(f"  field {i}: width {f['width']} init_val {f['init_val']:#x} min {f['min_val']:#x} "
                               f"max {f['max_val']:#x} mask {f['mask']:#x}")
                for e in p["evs"]:
                    click.echo(f"  ev {e['id']:#06x} value 0x{e['value']} -> {e['carrier']}")
