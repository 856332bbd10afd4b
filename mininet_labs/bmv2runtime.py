"""bmv2's Thrift runtime (simple_switch_CLI): egress queue rate and depth, to build a bottleneck."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from controller.toolchain import find_binary

DEFAULT_THRIFT_PORT = 9090  # simple_switch_grpc's default --thrift-port


class RuntimeCliError(RuntimeError):
    """simple_switch_CLI is missing, or refused a command."""


@dataclass(frozen=True)
class Bmv2Runtime:
    """One switch's Thrift runtime: TCP `thrift_port` on 127.0.0.1 of namespace `ns` (None: ours)."""

    thrift_port: int = DEFAULT_THRIFT_PORT
    ns: str | None = None

    def run(self, *commands: str, timeout: float = 20.0) -> str:
        """Run runtime-CLI commands (one per line); their output, or RuntimeCliError naming the failure."""
        binary = find_binary("simple_switch_CLI")
        if binary is None:
            raise RuntimeCliError("simple_switch_CLI not found (PATH, $P4_TOOLCHAIN_BIN)")
        argv = [binary, "--thrift-port", str(self.thrift_port)]
        if self.ns is not None:
            argv = ["ip", "netns", "exec", self.ns, *argv]
        proc = subprocess.run(argv, input="\n".join(commands) + "\n", capture_output=True, text=True,
                              timeout=timeout)
        out = proc.stdout + proc.stderr
        bad = [line for line in out.splitlines()
               if any(word in line for word in ("Error", "Invalid", "Could not", "Unknown syntax"))]
        if proc.returncode != 0 or bad:
            raise RuntimeCliError(f"simple_switch_CLI {' | '.join(commands)}: "
                                  f"{(bad or out.strip().splitlines() or ['exit ' + str(proc.returncode)])[-1]}")
        return out

    def set_queue_rate(self, pps: int, port: int | None = None) -> None:
        """Egress queue service rate in packets per second (of one port, or of all)."""
        self.run(f"set_queue_rate {pps}" + ("" if port is None else f" {port}"))

    def set_queue_depth(self, packets: int, port: int | None = None) -> None:
        """Egress queue capacity in packets (of one port, or of all); a full queue tail-drops."""
        self.run(f"set_queue_depth {packets}" + ("" if port is None else f" {port}"))
