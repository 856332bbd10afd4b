"""`fabricctl plan`: the entities each switch should hold, printed or exported."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from controller.model import congestion
from controller.model import lookup
from controller.files.safefile import UnsafeFile, marked, open_atomic
from controller.exitcodes import OpError
from controller.plan.fabricplan import FORMAT as PLAN_FORMAT, Plan, count_switch, totals
from fabricctl.context import _n, Env, _json_option, _print_json, _table, _failures_json


@click.command("plan")
@click.argument("switch_names", metavar="[SWITCH]...", nargs=-1)
@click.option("--export", "export", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE",
              help="Write the plan (every entity) as JSON to FILE ('-': stdout, and nothing else).")
@click.option("--healthy", is_flag=True, help="Plan as if nothing had failed (ignore the state file).")
@_json_option
@click.pass_obj
def plan_cmd(env: Env, switch_names: tuple[str, ...], export: str | None, healthy: bool, as_json: bool) -> None:
    """Summarise the plan: entity counts per switch role and table.

    The plan is what `install` would make the switches hold, under the failures recorded in
    the state file (--healthy: none). Naming switches restricts it to them; --json adds each
    switch's counts. --export writes every entity in the format Plan.from_json reads.

    \b
    Examples:
      fabricctl plan
      fabricctl --program eecmp_qp_hash plan p0-t0-0 p0-t1-0
      fabricctl plan --json | jq .totals.t0.all
      fabricctl plan --export plan.json
    """
    t = env.topo()
    failures = frozenset() if healthy else env.failures()
    chosen = [s.name for s in (lookup.switches(t, switch_names) if switch_names else t.switches)]
    p = env.plan(failures)
    assert p.fabric is not None
    counts = {n: count_switch(p.fabric, t.switch(n)) for n in chosen}
    sums = totals(counts, p.fabric)
    if export is not None:
        exported = p if not switch_names else p.only(chosen)
        if export == "-":
            exported.write_json(sys.stdout, indent=1)
            sys.stdout.write("\n")
            return
        _export_atomic(Path(export), exported)
    if as_json:
        _print_json({"topology": t.name, "program": env.program, "failures": _failures_json(t, failures),
                     "switches": counts, "totals": sums, "congestion": congestion.to_dict(t.congestion),
                     **({"exported": export} if export else {})})
        return
    roles = {r: sum(1 for n in chosen if t.switch(n).role == r) for r in ("t0", "t1")}
    ignored = " (state file ignored: --healthy)" if healthy and env.state_path().exists() else ""
    click.echo(f"plan of {t.name} for {env.program}: {_n(len(chosen), 'switch')} ({roles['t0']} t0, {roles['t1']} t1), "
               f"{_n(len(failures), 'failure')} recorded{ignored}")
    rows = [("role", "table", "entities")]
    for role in ("t0", "t1"):
        for table, count in sums[role].items():
            rows.append((role, table, str(count)))
    _table(rows, right=[2])
    if switch_names:
        for n in chosen:
            click.echo(f"{n}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts[n].items())))
    if t.congestion.on:
        click.echo(f"congestion signals: {t.congestion.describe()}")
    if export is not None:
        click.echo(f"exported: {export}")


def _export_atomic(path: Path, exported: Plan) -> None:
    """Stream a plan's JSON into a file that appears whole or not at all (controller.files.safefile: never
    over a file that is not a plan export, a symlink written through, the mode kept)."""
    try:
        with open_atomic(path, what="plan export", ours=marked(PLAN_FORMAT, "plan export")) as fh:
            exported.write_json(fh, indent=1)
            fh.write("\n")
    except UnsafeFile as e:
        raise OpError(str(e)) from None
    except OSError as e:
        raise OpError(f"cannot write {path}: {e.strerror or e}") from None
