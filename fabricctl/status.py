"""`fabricctl status`: the failures, what they make unreachable, and each switch against the plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from controller import failover, fabricops
from controller.fabricops import Outcome
from controller.plan.delta import Changes
from controller.model.denylist import Denylist
from controller.state.store import StoreError
from fabricctl.denylist import link_lines, links_json, topo_kind
from controller.service import status as service_status
from controller.state.statefile import DETECTOR
from fabricctl.context import _n, Env, _json_option, _print_json, _table, _failures_json, _sorted, _sync


@click.command()
@click.argument("switch_names", metavar="[SWITCH]...", nargs=-1)
@click.option("--offline", is_flag=True, help="Contact no switch: only the failures and what they make unreachable.")
@_json_option
@click.pass_obj
def status(env: Env, switch_names: tuple[str, ...], offline: bool, as_json: bool) -> None:
    """Compare each switch with its plan; list failures and unreachable destinations per plane.

    Per switch: entities missing (in the plan, not on the switch), extra (on the switch, not in
    the plan) and differing (same key, other action or members); on a switch of the kernel data
    plane (`netns:` in its record) the same for its routes, keyed by prefix. Reading needs no primary role.
    Exit 1 if a switch could not be read, 4 on a pipeline mismatch; being out of sync is exit 0.

    \b
    Examples:
      fabricctl status
      fabricctl status p0-t0-0 --json
      fabricctl status --offline               # failures and reachability only
    """
    t = env.topo()
    problem = None  # why the store cannot take changes now (etcd without quorum)
    if env.store_url:
        from fabricctl.store import store_status

        origins, problem, service = store_status(env.store(), t)
        where = str(env.store())
    else:
        origins = fabricops.load_recorded(t, env.state_path())
        service = service_status.read_status(env.state_path())
        where = str(env.state_path())
    failures = frozenset(origins)
    chosen = [s.name for s in (fabricops.switches(t, switch_names) if switch_names else t.switches)]
    down = fabricops.down_switches(failures)
    fab = fabricops.fabric(t, env.program, failures)
    lost = failover.unreachable(fab)
    per_plane = {p: [str(u) for u in lost if u.plane == p] for p in range(t.planes)}
    try:
        denylist, deny_problem = env.store().load_denylist()[0], None
    except StoreError as e:  # the failures were read: say why the denylist was not, and go on
        denylist, deny_problem = Denylist(), str(e)
    outcomes: dict[str, Outcome] = {}
    if not offline:
        contact = [n for n in chosen if n not in down]
        prepared = env.fleet().prepare(fab, contact)
        outcomes = {o.name: o for o in _sync(prepared, dry_run=True, push="never", label="status", show=not as_json)}
    code = fabricops.exit_code(outcomes.values())
    if as_json:
        _print_json({"topology": t.name, "program": env.program, "state": where,
                     **({"store_problem": problem} if env.store_url else {}), "failures": _failures_json(t, failures, origins),
                     "denylist": links_json(denylist, topo_kind(t)),
                     **({"denylist_problem": deny_problem} if deny_problem else {}), "controller": service,
                     "unreachable": {str(p): v for p, v in per_plane.items()},
                     "switches": {} if offline else {n: _status_json(n, outcomes) for n in chosen}})
        raise click.exceptions.Exit(code)
    click.echo(f"{t.name} ({env.program}), state {where}: {_n(len(failures), 'failure')}")
    if problem:
        click.echo(f"store: {problem}")
    for f in _sorted(failures):
        click.echo(f"  failed: {fabricops.describe_failure(t, f)} ({'detected' if origins[f] == DETECTOR else 'operator'})")
    for line in service_status.lines(service):
        click.echo(line)
    if deny_problem:
        click.echo(f"denylist: {deny_problem}")
    for line in link_lines(denylist, topo_kind(t)):
        click.echo(f"  denied link: {line}")
    for p, items in per_plane.items():
        click.echo(f"plane {p}: " + ("every destination reachable" if not items else f"{len(items)} unreachable"))
        for u in items:
            click.echo(f"  {u.split(': ', 1)[-1]}")
    if offline:
        return
    rows = [("switch", "missing", "extra", "differing", "")]
    for n in chosen:
        o = outcomes.get(n)
        if o is None:
            rows.append((n, "-", "-", "-", "recorded down"))
        elif not o.ok:
            click.echo(f"error: {o.error}", err=True)
            rows.append((n, "-", "-", "-", "error" if o.code == fabricops.SWITCH_ERROR else "pipeline"))
        else:
            assert o.delta is not None
            d = o.delta
            rows.append((n, str(len(d.inserts)), str(len(d.deletes)), str(len(d.modifies)),
                         "in sync" if not d else "out of sync"))
    _table(rows, right=[1, 2, 3])
    raise click.exceptions.Exit(code)


def _status_json(name: str, outcomes: Mapping[str, Outcome]) -> dict[str, Any]:
    o = outcomes.get(name)
    if o is None:
        return {"down": True}
    if not o.ok:
        return {"error": o.error, "exit_code": o.code}
    d: Changes[Any] = o.delta  # type: ignore[assignment]
    return {"missing": len(d.inserts), "extra": len(d.deletes), "differing": len(d.modifies), "in_sync": not d}
