"""fabricctl: the root command and its global options, composed from one module per command group."""

from __future__ import annotations

from pathlib import Path

import click

from controller.model import congestion
from controller import failurerecord
from fabricctl import options
from controller.plan.p4names import Program
from fabricctl.context import FABRIC_PROGRAMS, FabricGroup, Env, ElectionId
from fabricctl.analyze import analyze, topo_draw
from fabricctl.doctor import doctor
from fabricctl.endpoint import endpoint
from fabricctl.evs import evs
from fabricctl.collective import collective, shape_cmd
from fabricctl.failures import fail, restore
from fabricctl.fault import carrier_watch, fault
from fabricctl.install import install
from fabricctl.lab import lab  # imports Mininet only when a lab command runs
from fabricctl.labdemo import demo
from fabricctl.labscenarios import balance_cmd, cross_plane_cmd, fail_scenario
from fabricctl.p4 import p4
from fabricctl.plan import plan_cmd
from fabricctl.service import events_cmd, run_cmd
from fabricctl.shell import shell
from fabricctl.status import status
from fabricctl.store import store
from fabricctl.topo import topo
from fabricctl.version import version_option
from fabricctl.web import web
from controller.model.tlsconfig import TlsError, from_options


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


@click.group(cls=FabricGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), envvar="FABRIC_CONFIG", metavar="FILE",
              is_eager=True, expose_value=False, callback=options.config_callback,
              help="YAML file of global options (keys: topology, program, state, election_id, timeout, verbose, "
                   "tls_*, ecn_qdepth, trim_qdepth, trim_dscp, ecn_host_ports); "
                   "env FABRIC_CONFIG. The command line wins over FABRIC_* variables, which win over it.")
@click.option("--topology", "topology_file", type=click.Path(dir_okay=False, path_type=Path), envvar="FABRIC_TOPOLOGY",
              metavar="FILE", help="Topology YAML (env FABRIC_TOPOLOGY), e.g. examples/two_plane_lab.yaml.")
@click.option("--program", type=click.Choice(FABRIC_PROGRAMS), default="srv6_spray", show_default=True,
              envvar="FABRIC_PROGRAM", help="The P4 pipeline whose plan is used (env FABRIC_PROGRAM).")
@click.option("--state", "state_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              envvar="FABRIC_STATE",
              help=f"Failure-set state file (env FABRIC_STATE) [default: {failurerecord.STATE_NAME} next to the topology file].")
@click.option("--store", "store_url", envvar="FABRIC_STORE", metavar="etcd://HOST:PORT[,HOST:PORT...]",
              help="Keep the recorded failures, the controller's view and its events in this etcd cluster "
                   "(one prefix per fabric; several controllers and machines share them) instead of the state "
                   "file (env FABRIC_STORE; docs/store.md).")
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
@version_option
@click.pass_context
def cli(ctx: click.Context, topology_file: Path | None, program: Program, state_file: Path | None, store_url: str | None,
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
    FABRIC_TLS_SERVER_NAME, FABRIC_ECN_QDEPTH, FABRIC_TRIM_QDEPTH, FABRIC_TRIM_DSCP,
    FABRIC_ECN_HOST_PORTS) or in a --config file; the command line wins, then the environment,
    then the config file, then the topology file (congestion: {ecn_qdepth, trim_qdepth, trim_dscp,
    ecn_host_ports}).
    """
    options.setup_logging(verbose)
    try:
        tls_options = from_options(tls_ca, tls_cert, tls_key, tls_server_name)
    except TlsError as e:
        raise click.UsageError(str(e), ctx) from None
    ctx.obj = Env(topology_file, program, state_file, election_id, timeout, tls_options, congestion.given(ctx),
                  store_url or None)


for command in (topo, plan_cmd, install, fail, restore, status, shell, p4, lab, run_cmd, events_cmd, evs, endpoint, analyze,
                web, doctor, store):
    cli.add_command(command)
topo.add_command(topo_draw)
lab.add_command(fault)
lab.add_command(carrier_watch)
for command in (fail_scenario, cross_plane_cmd, balance_cmd, demo, collective, shape_cmd):
    lab.add_command(command)


def main() -> None:
    """The `fabricctl` console script."""
    cli(prog_name="fabricctl")


if __name__ == "__main__":
    main()
