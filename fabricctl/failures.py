"""`fabricctl fail` and `fabricctl restore`: record failures in the state file and pull or restore their segments."""

from __future__ import annotations

from typing import Any

import click

from controller import failover, planning
from controller.model import lookup
from controller.model.failures import Failure, failure_to_json
from controller.exitcodes import OpError
from controller.service import handoff
from controller.service.transaction import Proposal, Recorded, primary_of, record_then_apply
from controller.model.failures import DETECTOR, OPERATOR
from controller.southbound.fleet import Prepared
from controller.state.statelock import StateLocked
from controller.state.store import Record
from fabricctl.context import F, _n, Env, _json_option, _print_json, _failures_json, _sorted, _sync, _report


def _apply_options(f: F) -> F:
    f = click.option("--no-apply", is_flag=True, help="Only record it in the state file; touch no switch.")(f)
    return _json_option(f)


@click.group()
def fail() -> None:
    """Record a failure and pull it out of the switches that route around it.

    The failure is added to the state file, then every switch whose plan changes is reconciled
    to the plan under the new failure set (so `install` after a restart converges to the same
    tables). A switch recorded down is not contacted. --no-apply only records.

    While 'fabricctl run' is primary on this state file, the command only records (as the
    operator's failure: the controller never restores it by itself) and waits up to --timeout
    seconds for the controller to report it applied (exit 1 if it does not in time); with an
    --election-id above the controller's it writes the switches itself, with a warning. A failure
    the controller detected becomes the operator's when failed again here.

    \b
    Examples:
      fabricctl fail link p0-t0-0 p0-t1-1
      fabricctl fail switch p1-t1-0
      fabricctl fail port p0-t0-1 0            # host slot 0 of p0-t0-1 (or its host name)
      fabricctl fail link p0-t0-0 p0-t1-1 --no-apply
    """


@click.group()
def restore() -> None:
    """Remove a recorded failure (or all) and put its paths back into the switches.

    While 'fabricctl run' is primary on this state file, it applies the change and the command
    waits for it (up to --timeout seconds), as for 'fail'; a link whose probes still fail is
    recorded again by the controller's detector (exit 1, saying so).

    \b
    Examples:
      fabricctl restore link p0-t0-0 p0-t1-1
      fabricctl restore switch p1-t1-0
      fabricctl restore port p0-t0-1 h2
      fabricctl restore all
    """


def _failure_commands(group: click.Group, adding: bool) -> None:
    """`link`, `switch` and `port` under `fail` (adding) or `restore`."""
    verb = "fail" if adding else "restore"
    record = "Record" if adding else "Restore"

    @group.command("link", help=f"""{record} the link between a t0 and a t1 of one plane (in either order).

    \b
    Example:
      fabricctl {verb} link p0-t0-0 p0-t1-1
    """)
    @click.argument("a", metavar="T0")
    @click.argument("b", metavar="T1")
    @_apply_options
    @click.pass_obj
    def link_cmd(env: Env, a: str, b: str, no_apply: bool, as_json: bool) -> None:
        _change(env, lookup.link(env.topo(), a, b), adding, no_apply, as_json)

    @group.command("switch", help=f"""{record} a whole switch ({'down: all its links and host ports are down' if adding else 'back up'}).

    \b
    Example:
      fabricctl {verb} switch p0-t1-1
    """)
    @click.argument("name", metavar="SWITCH")
    @_apply_options
    @click.pass_obj
    def switch_cmd(env: Env, name: str, no_apply: bool, as_json: bool) -> None:
        _change(env, lookup.switch_failure(env.topo(), name), adding, no_apply, as_json)

    @group.command("port", help=f"""{record} a host port of a t0, named by its host slot or host.

    SLOT is the host slot (0-based position among the leaf's hosts, as 'topo show T0'
    lists them) or the name of the host on it.

    \b
    Examples:
      fabricctl {verb} port p0-t0-0 1
      fabricctl {verb} port p0-t0-0 h1
    """)
    @click.argument("leaf", metavar="T0")
    @click.argument("slot", metavar="SLOT")
    @_apply_options
    @click.pass_obj
    def port_cmd(env: Env, leaf: str, slot: str, no_apply: bool, as_json: bool) -> None:
        _change(env, lookup.host_port(env.topo(), leaf, slot), adding, no_apply, as_json)


_failure_commands(fail, True)
_failure_commands(restore, False)


@restore.command("all")
@_apply_options
@click.pass_obj
def restore_all(env: Env, no_apply: bool, as_json: bool) -> None:
    """Clear every recorded failure and reconcile the switches this changes.

    \b
    Example:
      fabricctl restore all
    """
    _change(env, None, False, no_apply, as_json)


LOCK_WAIT = 60.0  # seconds a fail/restore waits for another one on the same state file
CONFLICT_RETRIES = 50  # etcd store: read-compute-save rounds before giving up on a busy record

Planned = tuple[planning.FailureChange, Prepared | None]  # the change; its batch when this command applies it


def _change(env: Env, failure: Failure | None, adding: bool, no_apply: bool, as_json: bool) -> None:
    """Add or remove one failure (None with adding False: all), by the failure transaction
    (controller.service.transaction).

    The state file is the truth. Under its lock the command loads the recorded set, computes the
    new one, checks the plans of the switches it touches, records it, then reconciles those switches,
    still under the lock: two commands never interleave, so no switch ends up holding a set the file
    lacks. If a switch cannot be written, the recorded set stays and 'fabricctl install' converges to
    it. While a `fabricctl run` is primary on this state file, the command records and leaves the
    writing to it, waiting (after the lock, up to --timeout) for the controller to report the change
    applied.
    """
    store = env.store()
    store.load_rev()  # refuse a file that is not a state file before making a lock beside it
    t = env.topo()
    what = lookup.describe_failure(t, failure) if failure is not None else "all failures"
    verb = "fail" if adding else "restore"
    base: dict[str, Any] = {"state": str(store), "change": f"{verb} {what}"}
    dropped: list[Failure] = []  # restore all: recorded failures that name what the topology lacks
    claimed = False  # failing again what the detector recorded: the operator's now
    doc: dict[str, Any] = {}

    def read() -> tuple[Record, int]:
        nonlocal dropped
        if failure is None:
            known, dropped, rev = store.known_rev(t)
            return known, rev
        return store.recorded_rev(t)

    def compute(record: Record) -> Proposal | None:
        nonlocal claimed
        old = frozenset(record)
        new: frozenset[Failure] = frozenset()
        if failure is not None:
            new = old | {failure} if adding else old - {failure}
        claimed = failure is not None and adding and record.get(failure) == DETECTOR
        base.pop("dropped", None)
        if dropped:
            base["dropped"] = [failure_to_json(f) for f in dropped]
        if new == old and not dropped and not claimed:
            return None
        return Proposal(new, {failure: OPERATOR} if claimed and failure is not None else None)

    def plan(r: Recorded[Planned, None]) -> Planned:
        if r.overruled is not None:
            click.echo(f"warning: election id {env.election_id} is above the running controller's ({r.overruled}): "
                       "this command writes the switches itself, deposing it there until it ends", err=True)
        change = planning.failure_change(t, env.program, r.old, r.new)
        prepared = None
        if r.applies_here and change.touched:  # every plan checked before the record changes
            prepared = env.fleet().prepare(change.fabric, change.touched)
        return change, prepared

    def recorded(r: Recorded[Planned, None]) -> None:
        change = _planned(r)[0]
        lost = [str(u) for u in failover.unreachable(change.fabric)]
        doc.clear()
        doc.update(base, changed=True, failures=_failures_json(t, r.new), touched=change.touched, unreachable=lost)
        if as_json:
            return
        for f in dropped:
            click.echo(f"dropped: {lookup.describe_failure(t, f)} (not in the topology {env.topology_path()})")
        click.echo(f"recorded: {verb} {what}; {_n(len(r.new), 'failure')} in {store}"
                   + ("; held by the operator now (the controller had detected it)" if claimed else ""))
        click.echo(f"unreachable: {len(lost)}" + "".join(f"\n  {u}" for u in lost[:10])
                   + (f"\n  (+{len(lost) - 10} more: fabricctl status --offline)" if len(lost) > 10 else ""))

    def apply(r: Recorded[Planned, None]) -> None:
        change, prepared = _planned(r)
        if prepared is None:
            _not_applied(r, doc, as_json)
            return
        outcomes = _sync(prepared, dry_run=False, push="never", label=base["change"], show=not as_json)
        _report("apply", outcomes, prepared, dry_run=False, as_json=as_json, extra={**doc, "applied": True},
                retry="; the failure set is recorded: 'fabricctl install' retries them")

    try:
        r: Recorded[Planned, None] = record_then_apply(
            store, read, compute, lock_timeout=LOCK_WAIT, primary=primary_of(store), election_id=env.election_id,
            plan=plan, recorded=recorded, apply=None if no_apply else apply,
            describe=lambda f: lookup.describe_failure(t, f), conflict_retries=CONFLICT_RETRIES)
    except StateLocked as e:
        raise OpError(str(e)) from None
    except OSError as e:  # the lock file cannot be made (no such directory, read-only)
        raise OpError(f"cannot lock state file {store}: {e.strerror or e}") from None
    if r.proposal is None:
        if as_json:
            _print_json({**base, "changed": False, "failures": _failures_json(t, r.old), "touched": []})
        elif failure is None:
            click.echo("nothing to do: no failure recorded")
        else:
            recorded_now = ", ".join(lookup.describe_failure(t, f) for f in _sorted(r.old)) or "none"
            click.echo(f"nothing to do: {what} is {'already' if adding else 'not'} recorded as down "
                       f"(recorded: {recorded_now})")
    elif r.handoff is not None:
        handoff.report(r.handoff, doc, env.timeout, as_json)
    elif no_apply:
        _not_applied(r, doc, as_json)


def _planned(r: Recorded[Planned, None]) -> Planned:
    assert r.planned is not None, "the plan step runs before the record is saved"
    return r.planned


def _not_applied(r: Recorded[Planned, None], doc: dict[str, Any], as_json: bool) -> None:
    """The last line of a change this command recorded but did not apply (--no-apply, or nothing to write)."""
    touched = _planned(r)[0].touched
    if as_json:
        _print_json({**doc, "applied": False})
    elif r.controller is not None:
        click.echo(f"not applied by this command: the running controller ({r.controller}) applies the recorded set")
    elif touched:
        click.echo(f"not applied: {_n(len(touched), 'switch')} to reconcile "
                   f"({', '.join(touched[:6])}{', ...' if len(touched) > 6 else ''}); run 'fabricctl install'")
