"""fabricctl: the fabric controller's command line (topology, plan, install, failures, status, shell, p4)."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click

from controller import congestion, failover, options, ops, tls
from controller.safefile import UnsafeFile, marked, open_atomic
from controller.entries import ActionProfileGroup, ActionProfileMember, Entity, TableEntry, Value
from controller.failover import Failure, failure_to_json
from controller.ops import OpError, Outcome
from controller.p4info import P4Info, P4InfoError
from controller.p4rt import describe, show_value
from controller.plan import FORMAT as PLAN_FORMAT, Plan, count_switch, entity_to_json, plan as make_plan, totals
from controller.reconcile import Delta
from controller.runtime import shellenv
from controller.service import handoff, status as service_status
from controller.statefile import DETECTOR, OPERATOR
from controller.statelock import StateLocked, state_lock
from controller.toolchain import BUILD_DIR, PROGRAMS, Artifacts
from controller.topology import Topology, to_dict

FABRIC_PROGRAMS = ("srv6_spray", "eecmp_qp_hash")
F = TypeVar("F", bound=Callable[..., Any])

EPILOG = """\b
Exit codes:
  0  ok
  1  switch or gRPC errors: some switches failed (each named on stderr,
     the others' results on stdout); or the running controller did not
     apply a recorded fail/restore within --timeout
  2  usage or bad input: unknown command, option, switch, link or host slot;
     a state file that cannot be read or names what the topology lacks
  3  the topology file is invalid ('fabricctl topo validate' lists every problem)
  4  pipeline mismatch (a switch runs another P4Info, or none), the plan does
     not fit the P4Info, or we are not the primary controller; 4 wins over 1
  5  the P4 toolchain is missing or p4c failed (p4 compile), or the compiled
     artifacts are missing
  130 interrupted (Ctrl-C)

\b
Example session:
  export FABRIC_TOPOLOGY=examples/two_plane_lab.yaml
  fabricctl topo validate
  fabricctl plan
  fabricctl install --dry-run p0-t0-0
  fabricctl install
  fabricctl fail link p0-t0-0 p0-t1-1
  fabricctl status
  fabricctl restore all

\b
Environment, config file and completion:
  FABRIC_TIMEOUT=3 fabricctl status        # every global option has a FABRIC_* variable
  fabricctl --config fabric.yaml plan      # YAML: {topology: lab.yaml, timeout: 3}
  fabricctl -v install                     # log each write batch per switch (-vv: entities)
  eval "$(_FABRICCTL_COMPLETE=bash_source fabricctl)"   # bash completion (zsh_source, fish_source)
"""


class FabricGroup(click.Group):
    """A click group whose errors are one `error: ...` line on stderr, with meaningful exit codes."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,  # type: ignore[override]
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
    file's lock goes with the process and a write under way has removed its temporary file)."""
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
    program: str
    state_file: Path | None
    election_id: int
    timeout: float
    tls: tls.TlsConfig | None = None  # the --tls-* options, over the topology's TLS settings
    thresholds: dict[str, int | None] = field(default_factory=dict)  # --ecn-qdepth etc., over the topology's
    _topo: Topology | None = field(default=None, repr=False)
    _p4info: P4Info | None = field(default=None, repr=False)

    def topology_path(self) -> Path:
        if self.topology_file is None:
            raise OpError("no topology: give --topology FILE or set FABRIC_TOPOLOGY")
        return self.topology_file

    def topo(self) -> Topology:
        if self._topo is None:
            path = self.topology_path()
            topo, problems = ops.check_topology(path)
            if topo is None:
                n = len(problems) - 1
                more = f" (+{n} more; 'fabricctl topo validate' lists them)" if n else ""
                raise OpError(f"topology {path} is invalid: {problems[0]}{more}", ops.BAD_TOPOLOGY)
            topo = ops.with_tls(topo, self.tls)
            if any(v is not None for v in self.thresholds.values()):
                topo = dataclasses.replace(topo, congestion=congestion.override(topo.congestion, self.thresholds))
            self._topo = topo
        return self._topo

    def state_path(self) -> Path:
        return self.state_file if self.state_file is not None else self.topology_path().parent / ops.STATE_NAME

    def failures(self) -> frozenset[Failure]:
        return ops.load_failures(self.topo(), self.state_path())

    def artifacts(self) -> Artifacts:
        return Artifacts.of(self.program)

    def p4info(self) -> P4Info:
        if self._p4info is None:
            path = self.artifacts().p4info
            try:
                self._p4info = P4Info.load(path)
            except P4InfoError as e:
                raise OpError(f"the P4Info {e} (run 'fabricctl p4 compile')", ops.TOOLCHAIN) from None
            except OSError as e:
                raise OpError(f"cannot read the P4Info {path}: {e.strerror or e} (run 'fabricctl p4 compile')",
                              ops.TOOLCHAIN) from None
        return self._p4info

    def plan(self, failures: Iterable[Failure]) -> Plan:
        return make_plan(ops.fabric(self.topo(), self.program, failures))  # type: ignore[arg-type]


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


@click.group(cls=FabricGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), envvar="FABRIC_CONFIG", metavar="FILE",
              is_eager=True, expose_value=False, callback=options.config_callback,
              help="YAML file of global options (keys: topology, program, state, election_id, timeout, verbose, "
                   "tls_*, ecn_qdepth, trim_qdepth, trim_dscp); "
                   "env FABRIC_CONFIG. The command line wins over FABRIC_* variables, which win over it.")
@click.option("--topology", "topology_file", type=click.Path(dir_okay=False, path_type=Path), envvar="FABRIC_TOPOLOGY",
              metavar="FILE", help="Topology YAML (env FABRIC_TOPOLOGY), e.g. examples/two_plane_lab.yaml.")
@click.option("--program", type=click.Choice(FABRIC_PROGRAMS), default="srv6_spray", show_default=True,
              envvar="FABRIC_PROGRAM", help="The P4 pipeline whose plan is used (env FABRIC_PROGRAM).")
@click.option("--state", "state_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              envvar="FABRIC_STATE",
              help=f"Failure-set state file (env FABRIC_STATE) [default: {ops.STATE_NAME} next to the topology file].")
@click.option("--election-id", type=ElectionId(), default=1, show_default=True, envvar="FABRIC_ELECTION_ID",
              help="P4Runtime election id, N or HIGH,LOW; the highest id among controllers is primary "
                   "(env FABRIC_ELECTION_ID).")
@click.option("--timeout", type=options.Seconds(), default=10.0, show_default=True, envvar="FABRIC_TIMEOUT",
              help="Connect and per-call timeout for each switch (env FABRIC_TIMEOUT).")
@click.option("-v", "--verbose", count=True, envvar="FABRIC_VERBOSE",
              help="Log to stderr what is written to which switch: -v per write batch, -vv per entity "
                   "(env FABRIC_VERBOSE=1|2).")
@click.option("--tls-ca", type=click.Path(dir_okay=False, path_type=Path), envvar="FABRIC_TLS_CA", metavar="FILE",
              help="TLS to every switch: PEM of the CA that signs the switches' certificates (over the "
                   "topology's tls: settings; env FABRIC_TLS_CA). Default: plaintext, or the topology's.")
@click.option("--tls-cert", type=click.Path(dir_okay=False, path_type=Path), envvar="FABRIC_TLS_CERT", metavar="FILE",
              help="Mutual TLS: our client certificate (PEM; with --tls-key; env FABRIC_TLS_CERT).")
@click.option("--tls-key", type=click.Path(dir_okay=False, path_type=Path), envvar="FABRIC_TLS_KEY", metavar="FILE",
              help="Mutual TLS: the unencrypted key of --tls-cert (PEM; env FABRIC_TLS_KEY).")
@click.option("--tls-server-name", envvar="FABRIC_TLS_SERVER_NAME", metavar="NAME",
              help="Check the switches' certificates for NAME instead of the address's host "
                   "(unix: addresses: localhost; env FABRIC_TLS_SERVER_NAME).")
@congestion.global_options
@click.version_option(package_name="srv6-fabric", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, topology_file: Path | None, program: str, state_file: Path | None,
        election_id: int, timeout: float, verbose: int, tls_ca: Path | None, tls_cert: Path | None,
        tls_key: Path | None, tls_server_name: str | None) -> None:
    """Plan, install and operate a multi-plane SRv6 / E-ECMP fabric of P4Runtime switches.

    The topology file names every switch with its gRPC address and device id; the plan (the
    entities each switch should hold) follows from it, the chosen --program and the failures
    recorded in the state file. Nothing is written to a switch before the topology, the names
    given and the plan against the program's P4Info have all been checked.

    Global options may also follow the subcommand (fabricctl plan --timeout 3), be set in the
    environment (FABRIC_TOPOLOGY, FABRIC_PROGRAM, FABRIC_STATE, FABRIC_ELECTION_ID,
    FABRIC_TIMEOUT, FABRIC_VERBOSE, FABRIC_TLS_CA, FABRIC_TLS_CERT, FABRIC_TLS_KEY,
    FABRIC_TLS_SERVER_NAME, FABRIC_ECN_QDEPTH, FABRIC_TRIM_QDEPTH, FABRIC_TRIM_DSCP) or in a
    --config file; the command line wins, then the environment, then the config file, then
    the topology file (congestion: {ecn_qdepth, trim_qdepth, trim_dscp}).
    """
    options.setup_logging(verbose)
    try:
        tls_options = tls.from_options(tls_ca, tls_cert, tls_key, tls_server_name)
    except tls.TlsError as e:
        raise click.UsageError(str(e), ctx) from None
    ctx.obj = Env(topology_file, program, state_file, election_id, timeout, tls_options, congestion.given(ctx))


# --- topo ------------------------------------------------------------------------------------

@cli.group()
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
    chosen = ops.switches(t, switch_names) if switch_names else list(t.switches)
    if as_json:
        doc = to_dict(t)
        names = {s.name for s in chosen}
        doc["switches"] = [s for s in doc["switches"] if s["name"] in names]
        _print_json(doc)
        return
    click.echo(_summary(t))
    rows = [("switch", "role", "plane", "index", "device", "grpc", "mac", "ports")]
    for s in chosen:
        ports = (f"{len(s.host_ports)} hosts, {len(s.uplinks)} uplinks" if s.role == "t0"
                 else f"{len(s.downlinks)} downlinks")
        rows.append((s.name, s.role, str(s.plane), str(s.index), str(s.device_id), s.grpc_addr, s.mac, ports))
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


def _table(rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right = set(right)
    for r in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        click.echo("  ".join(cells).rstrip())


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
    t, problems = ops.check_topology(path)
    if t is not None:
        ops.with_tls(t, env.tls)  # the TLS files: an `error:` line and exit 2 if one cannot be used
    if as_json:
        _print_json({"topology": str(path), "ok": t is not None, "problems": problems,
                     **({"summary": _summary(t)} if t is not None else {})})
    elif t is None:
        for p in problems:
            click.echo(f"error: {path}: {p}", err=True)
    else:
        click.echo(f"ok: {_summary(t)}")
    if t is None:
        raise click.exceptions.Exit(ops.BAD_TOPOLOGY)


# --- plan ------------------------------------------------------------------------------------

@cli.command("plan")
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
    chosen = [s.name for s in (ops.switches(t, switch_names) if switch_names else t.switches)]
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
    """Stream a plan's JSON into a file that appears whole or not at all (controller.safefile: never
    over a file that is not a plan export, a symlink written through, the mode kept)."""
    try:
        with open_atomic(path, what="plan export", ours=marked(PLAN_FORMAT, "plan export")) as fh:
            exported.write_json(fh, indent=1)
            fh.write("\n")
    except UnsafeFile as e:
        raise OpError(str(e)) from None
    except OSError as e:
        raise OpError(f"cannot write {path}: {e.strerror or e}") from None


def _failures_json(t: Topology, failures: Iterable[Failure], origins: Mapping[Failure, str] | None = None
                   ) -> list[dict[str, Any]]:
    """Each failure's JSON and text; with `origins`, who recorded it ("by": operator or detector)."""
    return [{**failure_to_json(f), "text": ops.describe_failure(t, f), **({"by": origins[f]} if origins else {})}
            for f in _sorted(failures)]


def _sorted(failures: Iterable[Failure]) -> list[Failure]:
    return sorted(failures, key=lambda f: (type(f).__name__, str(f)))


# --- install ---------------------------------------------------------------------------------

@cli.command()
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
    down = ops.down_switches(failures)
    if switch_names:
        names = [s.name for s in ops.switches(t, switch_names)]
        skipped = [n for n in names if n in down]
        if skipped:
            raise OpError(f"{skipped[0]} is recorded down; restore it first ('fabricctl restore switch {skipped[0]}')")
    else:
        names = [s.name for s in t.switches if s.name not in down]
        skipped = [s.name for s in t.switches if s.name in down]
    p4info = env.p4info()
    encoded = ops.encode(env.plan(failures), names, p4info, str(env.artifacts().p4info))
    outcomes = _sync(env, encoded, p4info, dry_run=dry_run, push="force" if force_pipeline else "missing",
                     label="install", show=not as_json)
    _report("install", outcomes, encoded, dry_run=dry_run, as_json=as_json, skipped=skipped)


def _sync(env: Env, encoded: ops.Encoded, p4info: P4Info, *, dry_run: bool, push: ops.Push, label: str,
          show: bool) -> list[Outcome]:
    with _progress(label, len(encoded.desired), show) as tick:
        found = ops.sync(env.topo(), encoded, env.artifacts(), p4info, election_id=env.election_id,
                         timeout=env.timeout, dry_run=dry_run, push=push, progress=tick)
    return list(found.values())


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


def _report(verb: str, outcomes: Sequence[Outcome], encoded: ops.Encoded, *, dry_run: bool, as_json: bool,
            skipped: Sequence[str] = (), extra: Mapping[str, Any] | None = None, retry: str = "") -> None:
    """Print each switch's result (errors on stderr) and the summary; exit with the outcomes' code."""
    good = [o for o in outcomes if o.ok]
    bad = [o for o in outcomes if not o.ok]
    code = ops.exit_code(outcomes)
    if as_json:
        _print_json({**(extra or {}), "dry_run": dry_run,
                     "switches": {o.name: _outcome_json(o, encoded, dry_run) for o in outcomes},
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
                    click.echo(f"  {mark} {show_entity(encoded.shown(e))}")
    for n in skipped:
        click.echo(f"{n}: skipped (recorded down)")
    failed = f" ({', '.join(o.name for o in bad)})" if bad else ""
    click.echo(f"{verb}{' (dry run)' if dry_run else ''}: {_n(len(good), 'switch')} ok, {len(bad)} failed{failed}"
               + (retry if bad else ""))
    raise click.exceptions.Exit(code)


def _outcome_json(o: Outcome, encoded: ops.Encoded, dry_run: bool) -> dict[str, Any]:
    if not o.ok:
        return {"ok": False, "error": o.error, "exit_code": o.code}
    assert o.delta is not None
    doc: dict[str, Any] = {"ok": True, "pipeline": o.pipeline, "primary": o.primary, "inserts": len(o.delta.inserts),
                           "modifies": len(o.delta.modifies), "deletes": len(o.delta.deletes)}
    if dry_run:
        doc["delta"] = {kind: [entity_to_json(encoded.shown(e)) for e in getattr(o.delta, kind)]
                        for kind in ("inserts", "modifies", "deletes")}
    return doc


def show_entity(e: Entity) -> str:
    """One line for an entity: what identifies it, then what it does."""
    def call(action: str | None, params: tuple[tuple[str, Value], ...]) -> str:
        return f"{(action or '?').rsplit('.', 1)[-1]}({', '.join(f'{n}={show_value(v)}' for n, v in params)})"

    if isinstance(e, TableEntry):
        if e.group_id is not None:
            return f"{describe(e)} -> group {e.group_id}"
        if e.member_id is not None:
            return f"{describe(e)} -> member {e.member_id}"
        return f"{describe(e)} -> {call(e.action, e.params)}"
    if isinstance(e, ActionProfileMember):
        return f"{describe(e)} -> {call(e.action, e.params)}"
    assert isinstance(e, ActionProfileGroup)
    return f"{describe(e)}: members {', '.join(map(str, e.members)) or 'none'}"


# --- fail / restore --------------------------------------------------------------------------

def _apply_options(f: F) -> F:
    f = click.option("--no-apply", is_flag=True, help="Only record it in the state file; touch no switch.")(f)
    return _json_option(f)


@cli.group()
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


@cli.group()
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
        _change(env, ops.link(env.topo(), a, b), adding, no_apply, as_json)

    @group.command("switch", help=f"""{record} a whole switch ({'down: all its links and host ports are down' if adding else 'back up'}).

    \b
    Example:
      fabricctl {verb} switch p0-t1-1
    """)
    @click.argument("name", metavar="SWITCH")
    @_apply_options
    @click.pass_obj
    def switch_cmd(env: Env, name: str, no_apply: bool, as_json: bool) -> None:
        _change(env, ops.switch_failure(env.topo(), name), adding, no_apply, as_json)

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
        _change(env, ops.host_port(env.topo(), leaf, slot), adding, no_apply, as_json)


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


def _change(env: Env, failure: Failure | None, adding: bool, no_apply: bool, as_json: bool) -> None:
    """Add or remove one failure (None with adding False: all), under the state file's lock.

    The state file is the truth. Under its lock the command loads the recorded set, computes the
    new one, records it, then reconciles the switches it touches, still under the lock: two
    commands never interleave, so no switch ends up holding a set the file lacks. If a switch
    cannot be written, the recorded set stays and 'fabricctl install' converges to it. While a
    `fabricctl run` is primary on this state file, the command records and leaves the writing to
    it, waiting (after the lock, up to --timeout) for the controller to report the change applied.
    """
    state = env.state_path()
    try:
        failover.load_state(state)  # refuse a file that is not a state file before making a lock beside it
    except failover.FailoverError as e:
        raise OpError(str(e)) from None
    try:
        with state_lock(state, LOCK_WAIT):
            passed = _change_locked(env, state, failure, adding, no_apply, as_json)
    except StateLocked as e:
        raise OpError(str(e)) from None
    except OSError as e:  # the lock file cannot be made (no such directory, read-only)
        raise OpError(f"cannot lock state file {state}: {e.strerror or e}") from None
    if passed is not None:
        handoff.report(passed[0], passed[1], env.timeout, as_json)


def _change_locked(env: Env, state: Path, failure: Failure | None, adding: bool, no_apply: bool,
                   as_json: bool) -> tuple[handoff.Handoff, dict[str, Any]] | None:
    t = env.topo()
    dropped: list[Failure] = []
    if failure is None:
        old, dropped = ops.load_failures_known(t, state)
    else:
        old = env.failures()
    new: frozenset[Failure] = frozenset()
    if failure is not None:
        new = old | {failure} if adding else old - {failure}
    what = ops.describe_failure(t, failure) if failure is not None else "all failures"
    base = {"state": str(state), "change": f"{'fail' if adding else 'restore'} {what}"}
    if dropped:
        base["dropped"] = [failure_to_json(f) for f in dropped]
    claimed = adding and failure in old and failover.load_origins(state).get(failure) == DETECTOR
    if new == old and not dropped and not claimed:
        if as_json:
            _print_json({**base, "changed": False, "failures": _failures_json(t, new), "touched": []})
        elif failure is None:
            click.echo("nothing to do: no failure recorded")
        else:
            recorded = ", ".join(ops.describe_failure(t, f) for f in _sorted(old)) or "none"
            click.echo(f"nothing to do: {what} is {'already' if adding else 'not'} recorded as down "
                       f"(recorded: {recorded})")
        return None
    controller = handoff.running(state)
    if controller is not None and env.election_id > controller.election_id and not no_apply:
        click.echo(f"warning: election id {env.election_id} is above the running controller's ({controller}): "
                   "this command writes the switches itself, deposing it there until it ends", err=True)
        controller = None
    change = ops.failure_change(t, env.program, old, new)  # type: ignore[arg-type]
    new_fabric, touched = change.fabric, change.touched
    encoded = None
    if not no_apply and touched and controller is None:
        p4info = env.p4info()
        encoded = ops.encode(make_plan(new_fabric), touched, p4info, str(env.artifacts().p4info))
    try:
        failover.save_state(state, new, {failure: OPERATOR} if claimed else None)
    except failover.FailoverError as e:
        raise OpError(str(e)) from None
    saved_ns = time.monotonic_ns()
    lost = [str(u) for u in failover.unreachable(new_fabric)]
    doc = {**base, "changed": True, "failures": _failures_json(t, new), "touched": touched, "unreachable": lost}
    if not as_json:
        for f in dropped:
            click.echo(f"dropped: {ops.describe_failure(t, f)} (not in the topology {env.topology_path()})")
        click.echo(f"recorded: {'fail' if adding else 'restore'} {what}; {_n(len(new), 'failure')} in {state}"
                   + ("; held by the operator now (the controller had detected it)" if claimed else ""))
        click.echo(f"unreachable: {len(lost)}" + "".join(f"\n  {u}" for u in lost[:10])
                   + (f"\n  (+{len(lost) - 10} more: fabricctl status --offline)" if len(lost) > 10 else ""))
    if controller is not None and not no_apply:
        return handoff.Handoff(state, controller, saved_ns, new - old, old - new,
                               lambda f: ops.describe_failure(t, f)), doc
    if no_apply or encoded is None:
        if as_json:
            _print_json({**doc, "applied": False})
        elif controller is not None:
            click.echo(f"not applied by this command: the running controller ({controller}) applies the recorded set")
        elif touched:
            click.echo(f"not applied: {_n(len(touched), 'switch')} to reconcile "
                       f"({', '.join(touched[:6])}{', ...' if len(touched) > 6 else ''}); run 'fabricctl install'")
        return None
    outcomes = _sync(env, encoded, env.p4info(), dry_run=False, push="never", label=base["change"], show=not as_json)
    _report("apply", outcomes, encoded, dry_run=False, as_json=as_json, extra={**doc, "applied": True},
            retry="; the failure set is recorded: 'fabricctl install' retries them")
    return None


# --- status ----------------------------------------------------------------------------------

@cli.command()
@click.argument("switch_names", metavar="[SWITCH]...", nargs=-1)
@click.option("--offline", is_flag=True, help="Contact no switch: only the failures and what they make unreachable.")
@_json_option
@click.pass_obj
def status(env: Env, switch_names: tuple[str, ...], offline: bool, as_json: bool) -> None:
    """Compare each switch with its plan; list failures and unreachable destinations per plane.

    Per switch: entities missing (in the plan, not on the switch), extra (on the switch, not in
    the plan) and differing (same key, other action or members). Reading needs no primary role.
    Exit 1 if a switch could not be read, 4 on a pipeline mismatch; being out of sync is exit 0.

    \b
    Examples:
      fabricctl status
      fabricctl status p0-t0-0 --json
      fabricctl status --offline               # failures and reachability only
    """
    t = env.topo()
    origins = ops.load_recorded(t, env.state_path())
    failures = frozenset(origins)
    chosen = [s.name for s in (ops.switches(t, switch_names) if switch_names else t.switches)]
    down = ops.down_switches(failures)
    fab = ops.fabric(t, env.program, failures)  # type: ignore[arg-type]
    lost = failover.unreachable(fab)
    per_plane = {p: [str(u) for u in lost if u.plane == p] for p in range(t.planes)}
    outcomes: dict[str, Outcome] = {}
    encoded = None
    if not offline:
        contact = [n for n in chosen if n not in down]
        p4info = env.p4info()
        encoded = ops.encode(make_plan(fab), contact, p4info, str(env.artifacts().p4info))
        outcomes = {o.name: o for o in _sync(env, encoded, p4info, dry_run=True, push="never",
                                             label="status", show=not as_json)}
    code = ops.exit_code(outcomes.values())
    service = service_status.read_status(env.state_path())
    if as_json:
        _print_json({"topology": t.name, "program": env.program, "state": str(env.state_path()),
                     "failures": _failures_json(t, failures, origins), "controller": service,
                     "unreachable": {str(p): v for p, v in per_plane.items()},
                     "switches": {} if offline else {n: _status_json(n, outcomes) for n in chosen}})
        raise click.exceptions.Exit(code)
    click.echo(f"{t.name} ({env.program}), state {env.state_path()}: {_n(len(failures), 'failure')}")
    for f in _sorted(failures):
        click.echo(f"  failed: {ops.describe_failure(t, f)} ({'detected' if origins[f] == DETECTOR else 'operator'})")
    for line in service_status.lines(service):
        click.echo(line)
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
            rows.append((n, "-", "-", "-", "error" if o.code == ops.SWITCH_ERROR else "pipeline"))
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
    d: Delta = o.delta  # type: ignore[assignment]
    return {"missing": len(d.inserts), "extra": len(d.deletes), "differing": len(d.modifies), "in_sync": not d}


# --- shell -----------------------------------------------------------------------------------

@cli.command()
@click.argument("name", metavar="SWITCH")
@click.option("--push-pipeline", is_flag=True,
              help="Push our P4Info and bmv2 JSON first (this clears the switch's tables).")
@click.option("--print-command", is_flag=True, help="Print the p4runtime-shell command instead of running it.")
@click.pass_obj
def shell(env: Env, name: str, push_pipeline: bool, print_command: bool) -> None:
    """Open p4runtime-shell (IPython) on one switch, at its gRPC address and device id.

    Without --push-pipeline the switch must already run our program's P4Info (checked first,
    exit 4 otherwise) and the shell uses it; nothing is pushed. The shell arbitrates with
    --election-id: another controller with a higher one stays primary.

    p4runtime-shell runs from an environment of its own (it pins protobuf 3): the python that
    $FABRIC_SHELL_PYTHON names, else a venv made on first use under ~/.cache/srv6-fabric/shell-venv
    (pip install p4runtime-shell; said on stderr before it is made).

    \b
    Examples:
      fabricctl shell p0-t0-0
      fabricctl --program eecmp_qp_hash shell p0-t0-0 --push-pipeline
      fabricctl shell p0-t0-0 --print-command
    """
    (sw,) = ops.switches(env.topo(), [name])
    art = env.artifacts()
    p4info = env.p4info()
    try:
        tls_args = shellenv.tls_args(sw.grpc_addr, sw.tls)
        if print_command:
            python = shellenv.planned()  # nothing made: a venv not made yet is named where it would be
            if python.source != "venv":
                shellenv.probe(python, want_tls=bool(tls_args))
        else:
            if not push_pipeline:
                ops.check_device(sw, p4info, env.program, env.election_id, env.timeout)
            python = shellenv.find() or shellenv.make(say=lambda line: click.echo(line, err=True))
            shellenv.probe(python, want_tls=bool(tls_args))
    except tls.TlsError as e:
        raise OpError(f"{sw.name}: {e}") from None
    except shellenv.ShellEnvError as e:
        raise OpError(str(e), ops.TOOLCHAIN) from None
    push = (art.p4info, art.bmv2_json) if push_pipeline else None
    argv = shellenv.command(python.python, sw.grpc_addr, sw.device_id, env.election_id, push, tls_args)
    if print_command:
        click.echo(shlex.join(argv))
        return
    code = subprocess.call(argv)
    raise click.exceptions.Exit(0 if code == 0 else ops.SWITCH_ERROR)


# --- p4 --------------------------------------------------------------------------------------

@cli.group()
def p4() -> None:
    """The P4 programs: compile them with p4c into p4/build/.

    \b
    Example:
      fabricctl p4 compile srv6_spray
    """


@p4.command("compile")
@click.argument("programs", metavar="[PROGRAM]...", nargs=-1, type=click.Choice(PROGRAMS))
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=BUILD_DIR,
              show_default="p4/build", help="Where the bmv2 JSON and P4Info go.")
@_json_option
def p4_compile(programs: tuple[str, ...], out_dir: Path, as_json: bool) -> None:
    """Compile P4 programs (all by default) with p4c's bmv2 backend into bmv2 JSON and P4Info.

    p4c is found through $P4C, $P4_TOOLCHAIN_BIN or PATH; without it, exit 5.

    \b
    Examples:
      fabricctl p4 compile
      fabricctl p4 compile srv6_spray --out-dir /tmp/build
    """
    from controller.p4compile import CompileError, compile_program

    done = []
    for program in programs or PROGRAMS:
        try:
            result = compile_program(program, out_dir)
        except CompileError as e:
            first, _, rest = str(e).partition("\n")
            raise OpError(first, ops.TOOLCHAIN, rest) from None
        done.append(result)
        if not as_json:
            click.echo(f"{program}: {result.artifacts.bmv2_json}, {result.artifacts.p4info}")
    if as_json:
        _print_json({r.artifacts.program: {"bmv2_json": str(r.artifacts.bmv2_json), "p4info": str(r.artifacts.p4info),
                                           "warnings": r.warnings} for r in done})


# --- lab (mininet_labs.cli imports Mininet only when a lab command runs) ---------------------

from mininet_labs.cli import lab as _lab  # noqa: E402
from controller.service import cli as service_cli  # noqa: E402

cli.add_command(_lab)
cli.add_command(service_cli.run_cmd)
cli.add_command(service_cli.events_cmd)

from controller.evs_cli import evs as _evs  # noqa: E402  (endpoint mode: each host's EVs)
from endpoint.cli import endpoint as _endpoint  # noqa: E402  (endpoint-mode scenarios on a lab)

cli.add_command(_evs)
cli.add_command(_endpoint)

# --- analyze and topo draw (controller.analysis: failure analysis of designs, drawings) -------

from controller.analysis.cli import analyze as _analyze, topo_draw as _topo_draw  # noqa: E402

cli.add_command(_analyze)
topo.add_command(_topo_draw)


def main() -> None:
    """The `fabricctl` console script."""
    cli(prog_name="fabricctl")


if __name__ == "__main__":
    main()
