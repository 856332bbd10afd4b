"""bmv2's Thrift runtime (simple_switch_CLI): egress queue rate and depth, to build a bottleneck."""

from __future__ import annotations

import os
import select
import subprocess
import time
from dataclasses import dataclass, field

from controller.programs.toolchain import find_binary

DEFAULT_THRIFT_PORT = 9090  # simple_switch_grpc's default --thrift-port
PROMPT = b"RuntimeCmd: "
_REFUSALS = ("Error", "Invalid", "Could not", "Unknown syntax")


class RuntimeCliError(RuntimeError):
    """simple_switch_CLI is missing, or refused a command."""


@dataclass(frozen=True)
class Bmv2Runtime:
    """One switch's Thrift runtime: TCP `thrift_port` on 127.0.0.1 of namespace `ns` (None: ours)."""

    thrift_port: int = DEFAULT_THRIFT_PORT
    ns: str | None = None

    def argv(self) -> list[str]:
        binary = find_binary("simple_switch_CLI")
        if binary is None:
            raise RuntimeCliError("simple_switch_CLI not found (PATH, $P4_TOOLCHAIN_BIN)")
        argv = [binary, "--thrift-port", str(self.thrift_port)]
        return argv if self.ns is None else ["ip", "netns", "exec", self.ns, *argv]

    def run(self, *commands: str, timeout: float = 20.0) -> str:
        """Run runtime-CLI commands (one per line); their output, or RuntimeCliError naming the failure."""
        proc = subprocess.run(self.argv(), input="\n".join(commands) + "\n", capture_output=True, text=True,
                              timeout=timeout)
        out = proc.stdout + proc.stderr
        _check(commands, out, proc.returncode)
        return out

    def session(self, timeout: float = 20.0) -> "RuntimeSession":
        """A runtime CLI started now and kept open: its commands later take milliseconds, not the
        second or more simple_switch_CLI takes to start on a busy machine. Close it (or use `with`)."""
        return RuntimeSession(self, timeout)

    def set_queue_rate(self, pps: int, port: int | None = None, priority: int | None = None) -> None:
        """Egress queue service rate in packets per second (of one port, or of all; of one of the port's
        priority queues, or of each of them: bmv2 serves each priority queue at its own rate)."""
        if priority is not None and port is None:
            raise ValueError("a queue priority needs a port")
        self.run(f"set_queue_rate {pps}" + ("" if port is None else f" {port}")
                 + ("" if priority is None else f" {priority}"))

    def set_queue_depth(self, packets: int, port: int | None = None) -> None:
        """Egress queue capacity in packets (of one port, or of all); a full queue tail-drops."""
        self.run(f"set_queue_depth {packets}" + ("" if port is None else f" {port}"))


def _check(commands: tuple[str, ...], out: str, returncode: int | None) -> None:
    bad = [line for line in out.splitlines() if any(word in line for word in _REFUSALS)]
    if (returncode or 0) != 0 or bad:
        raise RuntimeCliError(f"simple_switch_CLI {' | '.join(commands)}: "
                              f"{(bad or out.strip().splitlines() or ['exit ' + str(returncode)])[-1]}")


@dataclass
class RuntimeSession:
    """One simple_switch_CLI process fed a command at a time through its stdin (Bmv2Runtime.session)."""

    runtime: Bmv2Runtime
    timeout: float = 20.0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.proc = subprocess.Popen(self.runtime.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self._read_prompt(("(start)",))

    def _read_prompt(self, commands: tuple[str, ...]) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        out, deadline, fd = b"", time.monotonic() + self.timeout, self.proc.stdout.fileno()
        while not out.endswith(PROMPT):
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(0.0, left))[0] if left > 0 else []
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                self.close()
                text = out.decode(errors="replace")
                _check(commands, text or "no answer", 1 if left > 0 else None)
                raise RuntimeCliError(f"simple_switch_CLI {' | '.join(commands)}: no answer in {self.timeout} s")
            out += chunk
        text = out[:-len(PROMPT)].decode(errors="replace")
        _check(commands, text, 0)
        return text

    def run(self, *commands: str) -> str:
        """Each command in turn; their output, or RuntimeCliError naming the one refused."""
        if self.proc is None or self.proc.poll() is not None or self.proc.stdin is None:
            raise RuntimeCliError("the simple_switch_CLI session is closed")
        out = ""
        for command in commands:
            self.proc.stdin.write(command.encode() + b"\n")
            self.proc.stdin.flush()
            out += self._read_prompt((command,))
        return out

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
            self.proc = None

    def __enter__(self) -> "RuntimeSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
