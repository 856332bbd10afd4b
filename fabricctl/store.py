"""`fabricctl store import/export`: move the record between a state file and etcd; the status of an etcd store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from controller.model.failures import Failure, FailoverError, to_text
from controller.state.statefile import save_state
from controller.exitcodes import BAD_INPUT, OpError
from controller.state.filestore import FileStore
from controller.state.store import Record, Store
from controller.model.topology import Topology

if TYPE_CHECKING:
    from controller.state.etcdstore import EtcdStore


def store_status(store: Store, topo: Topology) -> tuple[Record, str | None, dict[str, Any] | None]:
    """The record, why the store cannot take changes (None: it can) and the leader's view, for
    `fabricctl status`. Without a quorum the record is read from a member that still answers
    (serializable: what it last committed), and the problem is said in one line."""
    record, problem = store.last_known(topo)
    return record, problem, None if problem else store.read_view()


def _etcd(env: Any) -> EtcdStore:
    from controller.state.etcdstore import EtcdStore  # not imported by every fabricctl command (etcd3gw, requests)

    store = env.store()
    if not isinstance(store, EtcdStore):
        raise OpError("store import/export move the record between a state file and etcd: give --store "
                      "etcd://HOST:PORT (or FABRIC_STORE)", BAD_INPUT)
    return store


@click.group("store")
def store() -> None:
    """Move the recorded failures between a state file and the etcd store (--store).

    \b
    Examples:
      fabricctl --store etcd://10.0.0.1:2379 store import lab/.fabric-state.json
      fabricctl --store etcd://10.0.0.1:2379 store export backup.json
    """


@store.command("import")
@click.argument("state_file", required=False, type=click.Path(dir_okay=False, path_type=Path), metavar="[FILE]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_obj
def import_cmd(env: Any, state_file: Path | None, as_json: bool) -> None:
    """Replace the etcd record with a state file's (default: --state, or the one beside the topology).

    The file is read and checked against the topology first; the record in etcd is replaced in
    one transaction that compares the revision read (a concurrent change makes it fail, nothing
    half-done). Origins (operator, detector) are kept.

    \b
    Example:
      fabricctl --store etcd://10.0.0.1:2379,10.0.0.2:2379 store import lab/.fabric-state.json
    """
    target = _etcd(env)
    path = state_file or env.state_path()
    if not path.exists():
        raise OpError(f"no state file {path}", BAD_INPUT)
    record = FileStore(path).recorded(env.topo())
    before, rev = target.load_rev()
    new_rev = target.save(record, record, expect=rev)
    doc = {"from": str(path), "to": str(target), "failures": len(record), "replaced": len(before), "revision": new_rev}
    click.echo(json.dumps(doc, indent=2) if as_json else
               f"imported {len(record)} failures from {path} into {target} (replacing {len(before)}; revision {new_rev})")


@store.command("export")
@click.argument("state_file", required=False, type=click.Path(dir_okay=False, path_type=Path), metavar="[FILE]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_obj
def export_cmd(env: Any, state_file: Path | None, as_json: bool) -> None:
    """Write the etcd record into a state file (default: --state, or the one beside the topology).

    The file gets the bytes the record holds (the state-file format, origins kept); a file that
    is not a state file is refused, never overwritten.

    \b
    Example:
      fabricctl --store etcd://10.0.0.1:2379 store export backup-state.json
    """
    source = _etcd(env)
    path = state_file or env.state_path()
    record: dict[Failure, str] = source.load()
    try:
        with FileStore(path).locked(60.0):
            save_state(path, record, record)  # type: ignore[arg-type]
    except FailoverError as e:
        raise OpError(str(e), BAD_INPUT) from None
    text = to_text(record, record)  # type: ignore[arg-type]
    doc = {"from": str(source), "to": str(path), "failures": len(record), "bytes": len(text)}
    click.echo(json.dumps(doc, indent=2) if as_json else f"exported {len(record)} failures from {source} into {path}")
