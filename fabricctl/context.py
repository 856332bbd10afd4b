"""What every fabricctl command shares: the Env of global options, one-line errors and exit codes, JSON and
tables, progress and per-switch reports."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from controller.state.backends import open_store
from controller.state.store import Store, StoreError, StoreUnavailable
from controller.model import congestion
from controller import exitcodes, failurerecord, planning, topofile
from controller.model import lookup
from controller.southbound.base import Outcome, Push, exit_code
from fabricctl import options
from controller.runtime import tls
from controller.model.failures import Failure, failure_to_json
from controller.exitcodes import OpError
from controller.runtime.p4info import P4Info, P4InfoError
from controller.plan import p4names
from controller.plan.fabricplan import Plan, plan as make_plan
from controller.southbound.fleet import Fleet, Prepared
from controller.programs.toolchain import Artifacts
from controller.model.topology import Topology
from controller.model.tlsconfig import TlsConfig

FABRIC_PROGRAMS = p4names.FABRIC_PROGRAMS


F = TypeVar("F", bound=Callable[..., Any])


class FabricGroup(click.Group):
    """A click group whose errors are one `error: ...` line on stderr, with meaningful exit codes."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        args = options.hoist(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except KeyboardInterrupt:
            _interrupted()
        except click.exceptions.NoArgsIsHelpError as e:
            e.show()
            sys.exit(e.exit_code)
        except click.UsageError as e:
            where = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            click.echo(f"error: {_one_line(e.format_message())}{where}", err=True)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            click.echo(f"error: {_one_line(e.format_message())}", err=True)
            sys.exit(e.exit_code)
        except StoreError as e:  # the record's store: one line; exit 1 when it is unavailable
            click.echo(f"error: {e}", err=True)
            sys.exit(exitcodes.SWITCH_ERROR if isinstance(e, StoreUnavailable) else exitcodes.BAD_INPUT)
        except OpError as e:
            click.echo(f"error: {e}", err=True)
            if e.detail:
                click.echo(e.detail, err=True)
            sys.exit(e.code)
        except click.Abort as e:
            if isinstance(e.__cause__, KeyboardInterrupt):
                _interrupted()
            click.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _interrupted()


def _interrupted() -> None:
    """Ctrl-C: one line and exit 130 at once (switch calls still in flight are abandoned; the state
    file's lock goes with the process and a write under way has removed its temporary file). A thread the
    abandoned calls leave may raise before the exit (on a loaded machine it has the time): not said, the
    line is the answer."""
    threading.excepthook = lambda args: None
    click.echo("error: interrupted", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def _n(count: int, noun: str) -> str:
    """'1 switch', '2 switches'."""
    return f"{count} {noun}{'' if count == 1 else 'es' if noun.endswith('h') else 's'}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Env:
    """The global options, and the topology, state and P4Info they lead to (loaded when first asked for)."""

    topology_file: Path | None
    program: p4names.Program
    state_file: Path | None
    election_id: int
    timeout: float
    tls: TlsConfig | None = None  # the --tls-* options, over the topology's TLS settings
    thresholds: dict[str, int | None] = field(default_factory=dict)  # --ecn-qdepth etc., over the topology's
    store_url: str | None = None  # --store etcd://...; None: the state file
    _store: Store | None = field(default=None, repr=False)
    _topo: Topology | None = field(default=None, repr=False)
    _p4info: P4Info | None = field(default=None, repr=False)

    def topology_path(self) -> Path:
        if self.topology_file is None:
            raise OpError("no topology: give --topology FILE or set FABRIC_TOPOLOGY")
        return self.topology_file

    def topo(self) -> Topology:
        if self._topo is None:
            path = self.topology_path()
            topo, problems = topofile.check_topology(path)
            if topo is None:
                n = len(problems) - 1
                more = f" (+{n} more; 'fabricctl topo validate' lists them)" if n else ""
                raise OpError(f"topology {path} is invalid: {problems[0]}{more}", exitcodes.BAD_TOPOLOGY)
            topo = topofile.with_tls(topo, self.tls)
            if any(v is not None for v in self.thresholds.values()):
                topo = dataclasses.replace(topo, congestion=congestion.override(topo.congestion, self.thresholds))
            self._topo = topo
        return self._topo

    def state_path(self) -> Path:
        return self.state_file if self.state_file is not None else self.topology_path().parent / failurerecord.STATE_NAME

    def failures(self) -> frozenset[Failure]:
        if not self.store_url:
            return failurerecord.load_failures(self.topo(), self.state_path())
        return frozenset(self.store().recorded(self.topo()))

    def store(self) -> Store:
        """Where the record lives: the state file, or the etcd cluster of --store (controller.state)."""
        if self._store is None:
            fabric = self.topo().name if self.store_url else ""
            self._store = open_store(self.store_url, self.state_path() if not self.store_url else None, fabric,
                                     timeout=self.timeout)
        return self._store

    def artifacts(self) -> Artifacts:
        return Artifacts.of(self.program)

    def p4info(self) -> P4Info:
        if self._p4info is None:
            path = self.artifacts().p4info
            try:
                self._p4info = P4Info.load(path)
            except P4InfoError as e:
                raise OpError(f"the P4Info {e} (run 'fabricctl p4 compile')", exitcodes.TOOLCHAIN) from None
            except OSError as e:
                raise OpError(f"cannot read the P4Info {path}: {e.strerror or e} (run 'fabricctl p4 compile')",
                              exitcodes.TOOLCHAIN) from None
        return self._p4info

    def fleet(self) -> Fleet:
        """Each switch's southbound, chosen from its topology record (a network namespace: netlink; else P4Runtime)."""
        return Fleet(self.topo(), self.program, election_id=self.election_id, timeout=self.timeout,
                     p4info=lambda: (self.artifacts(), self.p4info()))

    def plan(self, failures: Iterable[Failure]) -> Plan:
        return make_plan(planning.fabric(self.topo(), self.program, failures))


class ElectionId(click.ParamType):
    """An election id: N, or HIGH,LOW (two 64-bit halves); at least 1."""

    name = "N|HIGH,LOW"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            number = value
        else:
            try:
                parts = [int(x, 0) for x in str(value).split(",")]
            except ValueError:
                self.fail(f"{value!r} is not N or HIGH,LOW", param, ctx)
            if len(parts) > 2 or any(not 0 <= x < 1 << 64 for x in parts[-2:] if len(parts) == 2):
                self.fail(f"{value!r} is not N or HIGH,LOW (each below 2**64)", param, ctx)
            number = parts[0] << 64 | parts[1] if len(parts) == 2 else parts[0]
        if not 1 <= number < 1 << 128:
            self.fail(f"{value!r} is not between 1 and 2**128 - 1", param, ctx)
        return number


def _json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(f)


def _print_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2))


def _table(rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right = set(right)
    for r in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        click.echo("  ".join(cells).rstrip())


def _failures_json(t: Topology, failures: Iterable[Failure], origins: Mapping[Failure, str] | None = None
                   ) -> list[dict[str, Any]]:
    """Each failure's JSON and text; with `origins`, who recorded it ("by": operator or detector)."""
    return [{**failure_to_json(f), "text": lookup.describe_failure(t, f), **({"by": origins[f]} if origins else {})}
            for f in _sorted(failures)]


def _sorted(failures: Iterable[Failure]) -> list[Failure]:
    return sorted(failures, key=lambda f: (type(f).__name__, str(f)))


def _sync(prepared: Prepared, *, dry_run: bool, push: Push, label: str, show: bool) -> list[Outcome]:
    with _progress(label, len(prepared.names), show) as tick:
        return prepared.run(dry_run=dry_run, push=push, progress=tick)


@contextmanager
def _progress(label: str, total: int, show: bool) -> Iterator[Callable[[str, Any, BaseException | None], None]]:
    """A progress bar over switches on stderr, when stderr is a terminal."""
    stream = sys.stderr
    if not show or not total or not stream.isatty():
        yield lambda name, result, error: None
        return
    with click.progressbar(length=total, label=label, file=stream, show_pos=True,
                           item_show_func=lambda name: name) as bar:
        yield lambda name, result, error: bar.update(1, name)


def _report(verb: str, outcomes: Sequence[Outcome], prepared: Prepared, *, dry_run: bool, as_json: bool,
            skipped: Sequence[str] = (), extra: Mapping[str, Any] | None = None, retry: str = "") -> None:
    """Print each switch's result (errors on stderr) and the summary; exit with the outcomes' code."""
    good = [o for o in outcomes if o.ok]
    bad = [o for o in outcomes if not o.ok]
    code = exit_code(outcomes)
    if as_json:
        _print_json({**(extra or {}), "dry_run": dry_run,
                     "switches": {o.name: _outcome_json(o, prepared, dry_run) for o in outcomes},
                     "skipped": list(skipped), "ok": len(good), "failed": len(bad)})
        raise click.exceptions.Exit(code)
    for o in outcomes:
        if not o.ok:
            click.echo(f"error: {o.error}", err=True)
            continue
        assert o.delta is not None
        pipeline = {"pushed": "pipeline pushed; ", "would push": "would push the pipeline; "}.get(o.pipeline, "")
        backup = "" if o.primary else " (not primary: a write would be refused)"
        if not o.delta:
            click.echo(f"{o.name}: {pipeline}in sync{backup}")
            continue
        click.echo(f"{o.name}: {pipeline}{'would write ' if dry_run else ''}{o.delta.summary()}{backup}")
        if dry_run:
            for mark, items in (("+", o.delta.inserts), ("~", o.delta.modifies), ("-", o.delta.deletes)):
                for e in items:
                    click.echo(f"  {mark} {prepared.text(o.name, e)}")
    for n in skipped:
        click.echo(f"{n}: skipped (recorded down)")
    failed = f" ({', '.join(o.name for o in bad)})" if bad else ""
    click.echo(f"{verb}{' (dry run)' if dry_run else ''}: {_n(len(good), 'switch')} ok, {len(bad)} failed{failed}"
               + (retry if bad else ""))
    raise click.exceptions.Exit(code)


def _outcome_json(o: Outcome, prepared: Prepared, dry_run: bool) -> dict[str, Any]:
    if not o.ok:
        return {"ok": False, "error": o.error, "exit_code": o.code}
    assert o.delta is not None
    doc: dict[str, Any] = {"ok": True, "pipeline": o.pipeline, "primary": o.primary, "inserts": len(o.delta.inserts),
                           "modifies": len(o.delta.modifies), "deletes": len(o.delta.deletes)}
    if dry_run:
        doc["delta"] = {kind: [prepared.to_json(o.name, e) for e in getattr(o.delta, kind)]
                        for kind in ("inserts", "modifies", "deletes")}
    return doc
