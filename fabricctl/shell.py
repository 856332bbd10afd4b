"""`fabricctl shell`: p4runtime-shell on one switch of the plan."""

from __future__ import annotations

import shlex
import subprocess
import sys

import click

from controller import ops
from controller.runtime import tls
from controller.ops import OpError
from controller.programs.toolchain import Artifacts
from fabricctl.common import (
    Env,
)


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
        tls_args = tls.shell_args(sw.grpc_addr, sw.tls)
    except tls.TlsError as e:
        raise OpError(f"{sw.name}: {e}") from None
    argv = shell_command(sw.grpc_addr, sw.device_id, env.election_id, art if push_pipeline else None) + tls_args
    if print_command:
        click.echo(shlex.join(argv))
        return
    if not push_pipeline:
        ops.check_device(sw, p4info, env.program, env.election_id, env.timeout)
    code = subprocess.call(argv)
    raise click.exceptions.Exit(0 if code == 0 else ops.SWITCH_ERROR)


def shell_command(address: str, device_id: int, election_id: int, push: Artifacts | None) -> list[str]:
    """The p4runtime-shell command line for a switch (with --config only when pushing)."""
    argv = [sys.executable, "-m", "p4runtime_sh", "--grpc-addr", address, "--device-id", str(device_id),
            "--election-id", f"{election_id >> 64},{election_id & ((1 << 64) - 1)}"]
    if push is not None:
        argv += ["--config", f"{push.p4info},{push.bmv2_json}"]
    return argv
