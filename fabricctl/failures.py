"""`fabricctl fail` and `fabricctl restore`: record failures in the state file and pull or restore their segments."""

from __future__ import annotations

import time
from typing import Any

import click

from controller import failover, fabricops
from controller.model.failures import Failure, failure_to_json
from controller.fabricops import OpError
from controller.service import handoff
from controller.model.failures import DETECTOR, OPERATOR
from controller.state.statelock import StateLocked
from controller.state.store import Conflict, Store
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
        _change(env, fabricops.link(env.topo(), a, b), adding, no_apply, as_json)

    @group.command("switch", help=f"""{record} a whole switch ({'down: all its links and host ports are down' if adding else 'back up'}).

    \b
    Example:
      fabricctl {verb} switch p0-t1-1
    """)
    @click.argument("name", metavar="SWITCH")
    @_apply_options
    @click.pass_obj
    def switch_cmd(env: Env, name: str, no_apply: bool, as_json: bool) -> None:
        _change(env, fabricops.switch_failure(env.topo(), name), adding, no_apply, as_json)

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
        _change(env, fabricops.host_port(env.topo(), leaf, slot), adding, no_apply, as_json)


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


def _change(env: Env, failure: Failure | None, adding: bool, no_apply: bool, as_json: bool) -> None:
    """Add or remove one failure (None with adding False: all), under the state file's lock.

    The state file is the truth. Under its lock the command loads the recorded set, computes the
    new one, records it, then reconciles the switches it touches, still under the lock: two
    commands never interleave, so no switch ends up holding a set the file lacks. If a switch
    cannot be written, the recorded set stays and 'fabricctl install' converges to it. While a
    `fabricctl run` is primary on this state file, the command records and leaves the writing to
    it, waiting (after the lock, up to --timeout) for the controller to report the change applied.
    """
    store = env.store()
    store.load_rev()  # refuse a file that is not a state file before making a lock beside it
    for attempt in range(CONFLICT_RETRIES):  # etcd: another writer saved between our read and our save
        try:
            with store.locked(LOCK_WAIT):
                passed = _change_locked(env, store, failure, adding, no_apply, as_json)
            break
        except Conflict:
            if attempt == CONFLICT_RETRIES - 1:
                raise
            time.sleep(0.01 * (attempt + 1))
        except StateLocked as e:
            raise OpError(str(e)) from None
        except OSError as e:  # the lock file cannot be made (no such directory, read-only)
            raise OpError(f"cannot lock state file {store}: {e.strerror or e}") from None
    if passed is not None:
        handoff.report(passed[0], passed[1], env.timeout, as_json)


def _change_locked(env: Env, store: Store, failure: Failure | None, adding: bool, no_apply: bool,
                   as_json: bool) -> tuple[handoff.Handoff, dict[str, Any]] | None:
    t = env.topo()
    dropped: list[Failure] = []
    record: dict[Failure, str] = {}
    if failure is None:
        old, dropped, rev = store.known_rev(t)
    else:
        record, rev = store.recorded_rev(t)
        old = frozenset(record)
    new: frozenset[Failure] = frozenset()
    if failure is not None:
        new = old | {failure} if adding else old - {failure}
    what = fabricops.describe_failure(t, failure) if failure is not None else "all failures"
    base = {"state": str(store), "change": f"{'fail' if adding else 'restore'} {what}"}
    if dropped:
        base["dropped"] = [failure_to_json(f) for f in dropped]
    claimed = adding and failure in old and record.get(failure) == DETECTOR
    if new == old and not dropped and not claimed:
        if as_json:
            _print_json({**base, "changed": False, "failures": _failures_json(t, new), "touched": []})
        elif failure is None:
            click.echo("nothing to do: no failure recorded")
        else:
            recorded = ", ".join(fabricops.describe_failure(t, f) for f in _sorted(old)) or "none"
            click.echo(f"nothing to do: {what} is {'already' if adding else 'not'} recorded as down "
                       f"(recorded: {recorded})")
        return None
    controller = handoff.primary_in(store.read_view())
    if controller is not None and env.election_id > controller.election_id and not no_apply:
        click.echo(f"warning: election id {env.election_id} is above the running controller's ({controller}): "
                   "this command writes the switches itself, deposing it there until it ends", err=True)
        controller = None
    change = fabricops.failure_change(t, env.program, old, new)
    new_fabric, touched = change.fabric, change.touched
    prepared = None
    if not no_apply and touched and controller is None:  # every plan checked before the record changes
        prepared = env.fleet().prepare(new_fabric, touched)
    saved_rev = store.save(new, {failure: OPERATOR} if claimed else None, expect=rev)  # Conflict: read again
    saved_ns = time.monotonic_ns()
    lost = [str(u) for u in failover.unreachable(new_fabric)]
    doc = {**base, "changed": True, "failures": _failures_json(t, new), "touched": touched, "unreachable": lost}
    if not as_json:
        for f in dropped:
            click.echo(f"dropped: {fabricops.describe_failure(t, f)} (not in the topology {env.topology_path()})")
        click.echo(f"recorded: {'fail' if adding else 'restore'} {what}; {_n(len(new), 'failure')} in {store}"
                   + ("; held by the operator now (the controller had detected it)" if claimed else ""))
        click.echo(f"unreachable: {len(lost)}" + "".join(f"\n  {u}" for u in lost[:10])
                   + (f"\n  (+{len(lost) - 10} more: fabricctl status --offline)" if len(lost) > 10 else ""))
    if controller is not None and not no_apply:
        return handoff.Handoff(env.state_path() if not env.store_url else None, controller, saved_ns, new - old,
                               old - new, lambda f: fabricops.describe_failure(t, f),
                               read=store.read_view if env.store_url else None, saved_rev=saved_rev), doc
    if no_apply or prepared is None:
        if as_json:
            _print_json({**doc, "applied": False})
        elif controller is not None:
            click.echo(f"not applied by this command: the running controller ({controller}) applies the recorded set")
        elif touched:
            click.echo(f"not applied: {_n(len(touched), 'switch')} to reconcile "
                       f"({', '.join(touched[:6])}{', ...' if len(touched) > 6 else ''}); run 'fabricctl install'")
        return None
    outcomes = _sync(prepared, dry_run=False, push="never", label=base["change"], show=not as_json)
    _report("apply", outcomes, prepared, dry_run=False, as_json=as_json, extra={**doc, "applied": True},
            retry="; the failure set is recorded: 'fabricctl install' retries them")
    return None
