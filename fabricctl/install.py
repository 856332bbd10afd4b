"""`fabricctl install`: make every switch hold the plan (reconcile), with a progress bar and per-switch outcomes."""

from __future__ import annotations


import click

from controller import planning
from controller.model import lookup
from controller.exitcodes import OpError
from fabricctl.context import Env, _json_option, _sync, _report


@click.command()
@click.argument("switch_names", metavar="[SWITCH]...", nargs=-1)
@click.option("--dry-run", is_flag=True, help="Read the switches and print each one's delta; write nothing.")
@click.option("--force-pipeline", is_flag=True,
              help="Replace a pipeline that is not ours (this clears that switch's tables).")
@_json_option
@click.pass_obj
def install(env: Env, switch_names: tuple[str, ...], dry_run: bool, force_pipeline: bool, as_json: bool) -> None:
    """Make every switch (or the named ones) hold exactly its plan.

    Each switch is reconciled: what it lacks is inserted, what differs modified, what the plan
    does not have deleted; a switch already matching is not written. A switch with no pipeline
    gets the program's; one running another P4Info is refused (exit 4) unless --force-pipeline.
    A switch whose topology record names a network namespace (`netns:`) is on the kernel data
    plane: its routes are read back and written over netlink (docs/kernel.md).
    Switches recorded down in the state file are skipped. The switches run in parallel; each
    one's result or first error is reported, and one failing does not stop the others.

    \b
    Examples:
      fabricctl install                        # the whole fabric
      fabricctl install p0-t0-0 p0-t1-1        # two switches
      fabricctl install --dry-run p0-t0-0      # what would change, entity by entity
      fabricctl --timeout 3 install --json
    """
    t = env.topo()
    failures = env.failures()
    down = planning.down_switches(failures)
    if switch_names:
        names = [s.name for s in lookup.switches(t, switch_names)]
        skipped = [n for n in names if n in down]
        if skipped:
            raise OpError(f"{skipped[0]} is recorded down; restore it first ('fabricctl restore switch {skipped[0]}')")
    else:
        names = [s.name for s in t.switches if s.name not in down]
        skipped = [s.name for s in t.switches if s.name in down]
    prepared = env.fleet().prepare(planning.fabric(t, env.program, failures), names)
    outcomes = _sync(prepared, dry_run=dry_run, push="force" if force_pipeline else "missing",
                     label="install", show=not as_json)
    _report("install", outcomes, prepared, dry_run=dry_run, as_json=as_json, skipped=skipped)
