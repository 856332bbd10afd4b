"""`fabricctl shell`: p4runtime-shell on one switch of the plan."""

from __future__ import annotations

import shlex
import subprocess

import click

from controller import exitcodes
from controller.model import lookup
from controller.southbound import p4runtime
from controller.southbound.fleet import require_p4runtime
from controller.runtime import shellenv
from controller.exitcodes import OpError
from fabricctl.context import Env
from controller.model.tlsconfig import TlsError


@click.command()
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
    (sw,) = lookup.switches(env.topo(), [name])
    require_p4runtime(env.topo(), [sw.name], "the P4Runtime shell")
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
                p4runtime.check_device(sw, p4info, env.program, env.election_id, env.timeout)
            python = shellenv.find() or shellenv.make(say=lambda line: click.echo(line, err=True))
            shellenv.probe(python, want_tls=bool(tls_args))
    except TlsError as e:
        raise OpError(f"{sw.name}: {e}") from None
    except shellenv.ShellEnvError as e:
        raise OpError(str(e), exitcodes.TOOLCHAIN) from None
    push = (art.p4info, art.bmv2_json) if push_pipeline else None
    argv = shellenv.command(python.python, sw.grpc_addr, sw.device_id, env.election_id, push, tls_args)
    if print_command:
        click.echo(shlex.join(argv))
        return
    code = subprocess.call(argv)
    raise click.exceptions.Exit(0 if code == 0 else exitcodes.SWITCH_ERROR)


