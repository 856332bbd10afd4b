"""`fabricctl --version`: this package's version and those of what it runs with (P4 toolchain, protobuf, gRPC, p4runtime)."""

from __future__ import annotations

import subprocess
from importlib import metadata
from typing import Any

import click

from controller.programs.toolchain import find_binary

TOOLS = ("p4c", "simple_switch_grpc")


def tool_version(name: str, timeout: float = 10.0) -> tuple[str | None, str]:
    """(path, first line of `name --version`) of a toolchain binary; path None and why when it is not found
    or does not run."""
    path = find_binary(name)
    if path is None:
        return None, "not found (PATH, $P4_TOOLCHAIN_BIN" + (", $P4C)" if name == "p4c" else ", $SIMPLE_SWITCH_GRPC)")
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, errors="replace", timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{path} does not run: {getattr(e, 'strerror', None) or e}"
    text = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
    return path, (text[0] if text else f"{path} printed no version (exit {proc.returncode})")


def dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def versions() -> dict[str, Any]:
    """Everything `--version` names, as a dict (also what `doctor --json` reports)."""
    from google.protobuf.internal import api_implementation

    out: dict[str, Any] = {"srv6-fabric": dist_version("srv6-fabric")}
    for name in TOOLS:
        path, text = tool_version(name)
        out[name] = {"path": path, "version": text if path else None, **({} if path else {"error": text})}
    out["protobuf"] = {"version": dist_version("protobuf"), "implementation": api_implementation.Type()}
    out["grpcio"] = dist_version("grpcio")
    out["p4runtime"] = {"bindings": "finsy", "version": dist_version("finsy")}  # controller.runtime.proto
    return out


def lines(v: dict[str, Any]) -> list[str]:
    out = [f"fabricctl (srv6-fabric) {v['srv6-fabric']}"]
    for name in TOOLS:
        t = v[name]
        out.append(f"{name}: {t['version']} ({t['path']})" if t["path"] else f"{name}: {t['error']}")
    out.append(f"protobuf: {v['protobuf']['version']} ({v['protobuf']['implementation']} implementation)")
    out.append(f"grpcio: {v['grpcio']}")
    out.append(f"p4runtime: bindings from {v['p4runtime']['bindings']} {v['p4runtime']['version']}")
    return out


def print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """The eager --version option's callback."""
    if not value or ctx.resilient_parsing:
        return
    for line in lines(versions()):
        click.echo(line)
    ctx.exit()


version_option = click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=print_version,
                              help="Show the version, the P4 toolchain's, protobuf's, grpcio's and p4runtime's, and exit.")
