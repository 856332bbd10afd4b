"""p4runtime-shell's own environment: the interpreter that runs it, found or made, and its command line.

p4runtime-shell pins protobuf<3.21, p4runtime==1.4.1, IPython 7.31 and jedi 0.17.2, none of which
can share an environment with the controller (protobuf 6, finsy's bindings). So `fabricctl shell`
runs it with another interpreter: the one $FABRIC_SHELL_PYTHON names, else the virtual environment
made for it on first use under the user's cache directory (make()).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from controller.runtime.tls import target_name
from controller.model.tlsconfig import TlsConfig, TlsError

SHELL_PACKAGE = "p4runtime-shell==0.0.6"  # the newest release; 0.0.6 brought its TLS options
ENV_VARIABLE = "FABRIC_SHELL_PYTHON"
_READY = ".srv6-fabric-shell"  # written into a venv we made once pip has finished; holds SHELL_PACKAGE
_PROBE_TIMEOUT = 60.0  # importing p4runtime_sh.p4runtime (pure-Python protobuf 3) on a loaded machine
_INSTALL_TIMEOUT = 900.0

# Run by the shell's interpreter: is p4runtime-shell there, and has it TLS options (SSLOptions, 0.0.6)?
_PROBE = """\
import importlib.util, json
found = importlib.util.find_spec("p4runtime_sh") is not None
tls = None
if found:
    import p4runtime_sh.p4runtime as p
    tls = hasattr(p, "SSLOptions")
print(json.dumps({"found": found, "tls": tls}))
"""


class ShellEnvError(Exception):
    """p4runtime-shell's environment is missing, broken, or could not be made."""


@dataclass(frozen=True)
class ShellPython:
    """The interpreter that runs p4runtime-shell and where it came from ("FABRIC_SHELL_PYTHON" or "venv")."""

    python: Path
    source: str


def default_venv() -> Path:
    """Where make() puts the shell's venv: $XDG_CACHE_HOME (else ~/.cache)/srv6-fabric/shell-venv."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "srv6-fabric" / "shell-venv"


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ready(venv: Path) -> bool:
    """True if make() finished in `venv` for this SHELL_PACKAGE (a venv of another pin is not ready)."""
    marker = venv / _READY
    return marker.is_file() and marker.read_text().strip() == SHELL_PACKAGE and _venv_python(venv).exists()


def find(venv: Path | None = None) -> ShellPython | None:
    """The shell's interpreter: $FABRIC_SHELL_PYTHON if set (ShellEnvError if it is not an executable
    file), else the ready venv, else None (make() would make it)."""
    named = os.environ.get(ENV_VARIABLE)
    if named:
        path = Path(named)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ShellEnvError(f"{ENV_VARIABLE}={named}: not an executable file")
        return ShellPython(path, ENV_VARIABLE)
    venv = default_venv() if venv is None else venv
    return ShellPython(_venv_python(venv), "venv") if ready(venv) else None


def planned(venv: Path | None = None) -> ShellPython:
    """find(), or the interpreter make() would make (for printing a command without making anything)."""
    found = find(venv)
    return found if found is not None else ShellPython(_venv_python(default_venv() if venv is None else venv), "venv")


def make(venv: Path | None = None, say: Callable[[str], None] = lambda line: None) -> ShellPython:
    """Make the shell's venv (python3 -m venv, then pip install SHELL_PACKAGE) unless it is ready.

    `say` gets one line before anything is made. A failed install removes what it made (nothing
    half-done is left to be taken for a working shell) and raises ShellEnvError with pip's last lines.
    """
    venv = default_venv() if venv is None else venv
    if ready(venv):
        return ShellPython(_venv_python(venv), "venv")
    say(f"p4runtime-shell is not in the controller's environment (it pins protobuf<3.21): making a virtual "
        f"environment for it at {venv} (pip install {SHELL_PACKAGE}) ...")
    if venv.exists():
        shutil.rmtree(venv)  # a venv of an older pin, or what a failed make() could not remove
    venv.parent.mkdir(parents=True, exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)  # not our venv's python: the interpreter under it
    steps = [("python3 -m venv", [base, "-m", "venv", str(venv)]),
             (f"pip install {SHELL_PACKAGE}", [str(_venv_python(venv)), "-m", "pip", "install", "-q",
                                                "--disable-pip-version-check", SHELL_PACKAGE])]
    try:
        for step, argv in steps:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT)
            if done.returncode != 0:
                last = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise ShellEnvError(f"making p4runtime-shell's environment at {venv} failed: {step}: "
                                    f"{' / '.join(last) or f'exit {done.returncode}'}")
    except subprocess.TimeoutExpired:
        shutil.rmtree(venv, ignore_errors=True)
        raise ShellEnvError(f"making p4runtime-shell's environment at {venv} took over {_INSTALL_TIMEOUT:.0f}s; "
                            "nothing is left of it") from None
    except BaseException:
        shutil.rmtree(venv, ignore_errors=True)
        raise
    (venv / _READY).write_text(SHELL_PACKAGE + "\n")
    return ShellPython(_venv_python(venv), "venv")


def probe(shell: ShellPython, want_tls: bool) -> None:
    """Check that `shell` can run p4runtime-shell (and, with want_tls, that it has TLS options);
    ShellEnvError or TlsError saying what is missing. A venv make() made is trusted as it is."""
    if shell.source == "venv" and not want_tls:
        return
    try:
        done = subprocess.run([str(shell.python), "-c", _PROBE], capture_output=True, text=True,
                              timeout=_PROBE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ShellEnvError(f"{_described(shell)}: could not run it: {e}") from None
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = " / ".join(done.stderr.strip().splitlines()[-2:])
        raise ShellEnvError(f"{_described(shell)}: importing p4runtime_sh failed: {last or f'exit {done.returncode}'}") from None
    if not found["found"]:
        raise ShellEnvError(f"{_described(shell)}: p4runtime-shell is not installed there "
                            f"(pip install {SHELL_PACKAGE} into it, or unset {ENV_VARIABLE})")
    if want_tls and not found["tls"]:
        raise TlsError("this p4runtime-shell has no TLS options (--ssl, --cacert, --cert, --private-key: "
                       "p4runtime-shell 0.0.6 and later); upgrade it")


def _described(shell: ShellPython) -> str:
    return f"{ENV_VARIABLE}={shell.python}" if shell.source == ENV_VARIABLE else f"p4runtime-shell's venv {shell.python}"


def tls_args(address: str, config: TlsConfig | None) -> list[str]:
    """p4runtime-shell's options for this TLS setting (--ssl --cacert --cert --private-key);
    TlsError where the shell cannot follow it (it has no option for the server name)."""
    if config is None:
        return []
    name = target_name(address, config)
    if name is not None:
        why = (f"server name {name!r}" if config.server_name else
               "server name 'localhost' that a unix: address needs (gRPC would check the socket path)")
        raise TlsError(f"p4runtime-shell has no option for the TLS {why}; give the switch a host:port "
                       "address its certificate names")
    out = ["--ssl"]
    if config.ca is not None:
        out += ["--cacert", str(config.ca)]
    if config.cert is not None:
        out += ["--cert", str(config.cert), "--private-key", str(config.key)]
    return out


def command(python: Path, address: str, device_id: int, election_id: int, push: tuple[Path, Path] | None = None,
            tls: list[str] | None = None) -> list[str]:
    """The p4runtime-shell command line for a switch: `push` (P4Info, bmv2 JSON) adds --config, which
    makes the shell push that pipeline first; `tls` is tls_args()."""
    argv = [str(python), "-m", "p4runtime_sh", "--grpc-addr", address, "--device-id", str(device_id),
            "--election-id", f"{election_id >> 64},{election_id & ((1 << 64) - 1)}"]
    if push is not None:
        argv += ["--config", f"{push[0]},{push[1]}"]
    return argv + (tls or [])
