"""`fabricctl shell` really opens p4runtime-shell, from its own environment, on a switch of the plan,
and the shell reads back exactly the table entries the controller installed there."""

from __future__ import annotations

from tests.paths import REPO

import os
import subprocess
import sys
from typing import Iterator

import pytest

from controller.model import topology
from controller.runtime.codec import decode_entity
from controller.plan.entries import TableEntry
from controller.runtime import shellenv
from controller.runtime.proto import p4runtime_pb2
from tests.bmv2.conftest import require_bmv2
from tests.bmv2.fabric_fixture import FabricLab, start_lab

ROOT = REPO
LEAF = "p0-t0-0"

# Typed into the shell (IPython reads a pipe line by line): every entry of every non-const table, one
# line each, as the wire bytes of the TableEntry message p4runtime-shell read.
SHELL_INPUT = (
    '_ = [print("ENTRY", e.msg().SerializeToString().hex()) for t in p4info.tables '
    'if not t.is_const_table for e in TableEntry(t.preamble.name).read()]\n'
    'print("READ DONE")\n'
)


@pytest.fixture(scope="module")
def shell_python() -> shellenv.ShellPython:
    """p4runtime-shell's interpreter: $FABRIC_SHELL_PYTHON, the venv fabricctl made, or that venv made now."""
    try:
        return shellenv.find() or shellenv.make(say=lambda line: print(line, file=sys.stderr))
    except shellenv.ShellEnvError as e:
        pytest.skip(f"p4runtime-shell's environment could not be made: {e}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FabricLab]:
    """1 plane x 1 T1 x 2 T0 x 1 host: three switches."""
    require_bmv2()
    yield from start_lab(tmp_path_factory.mktemp("shell"), topology.build(1, 1, 2, 1, name="shell_lab"), tag="sh")


def test_shell_reads_the_entries_the_controller_installed(lab: FabricLab, shell_python: shellenv.ShellPython,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    lab.wipe()
    result = lab.cli("install", LEAF)
    assert result.exit_code == 0, result.stderr
    want = sorted((e for e in lab.desired()[LEAF] if isinstance(e, TableEntry) and not e.is_default), key=repr)
    assert want  # the leaf's plan has table entries to find

    # the real command, as a user types it, its stdin a pipe; the shell's interpreter as the test found it
    env = {**os.environ, shellenv.ENV_VARIABLE: str(shell_python.python)}
    env.pop("FABRIC_TOPOLOGY", None)
    argv = [sys.executable, "-m", "fabricctl", "--topology", str(lab.path), "--election-id", "5", "shell", LEAF]
    done = subprocess.run(argv, input=SHELL_INPUT, capture_output=True, text=True, timeout=180, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "READ DONE" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    # (IPython's prompt may stand before a line the shell prints)
    read = [p4runtime_pb2.TableEntry.FromString(bytes.fromhex(line.split("ENTRY ", 1)[1].strip()))
            for line in done.stdout.splitlines() if "ENTRY " in line]
    got = sorted((decode_entity(p4runtime_pb2.Entity(table_entry=te), lab.p4info) for te in read), key=repr)
    assert got == want

    # the command it ran: the named environment's shell, the switch's address, device id and election id
    monkeypatch.setenv(shellenv.ENV_VARIABLE, str(shell_python.python))
    printed = lab.cli("--election-id", "5", "shell", LEAF, "--print-command")
    sw = lab.topo.switch(LEAF)
    assert printed.stdout.split() == [str(shell_python.python), "-m", "p4runtime_sh", "--grpc-addr", sw.grpc_addr,
                                      "--device-id", str(sw.device_id), "--election-id", "0,5"]


def test_the_shell_environment_is_not_the_controllers(shell_python: shellenv.ShellPython) -> None:
    """p4runtime-shell (and its protobuf 3) is only in its own environment; the controller's is protobuf 6 on upb."""
    import importlib.util

    from controller.runtime.proto import implementation, protobuf_version

    assert importlib.util.find_spec("p4runtime_sh") is None
    assert (implementation(), int(protobuf_version.split(".")[0]) >= 6) == ("upb", True)
    versions = subprocess.run([str(shell_python.python), "-c",
                               "import google.protobuf, p4runtime_sh; print(google.protobuf.__version__)"],
                              capture_output=True, text=True, timeout=120)
    assert versions.returncode == 0, versions.stderr
    if shell_python.source == "venv":  # the one fabricctl makes: p4runtime-shell 0.0.6 pins protobuf<3.21
        assert versions.stdout.strip().startswith("3.20.")
