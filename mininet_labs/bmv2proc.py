"""The simple_switch_grpc process: waiting for its gRPC server, the tail of its logs, stopping it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import grpc

from controller.runtime.tls import TlsConfig, channel as tls_channel


PRIORITY_QUEUES = 2  # queue 0 for traffic, 1 (TRIM_PRIORITY in p4/include/defines.p4) served first


class SwitchStartError(RuntimeError):
    """simple_switch_grpc did not come up; the message carries the tail of its log."""


@dataclass(frozen=True)
class Bmv2Build:
    """What a simple_switch_grpc binary was built with, read from its --help (Thrift and nanomsg are
    both optional in bmv2's configure; the toolkit needs neither, only gRPC and --no-p4)."""

    binary: str
    thrift: bool  # --thrift-port: the runtime CLI server
    nanomsg: bool  # --notifications-addr, --nanolog, --packet-in
    priority_queues: bool = False  # -- --priority-queues N (the trim class's queue, p4/include/congestion.p4)

    def target_args(self) -> list[str]:
        """Target options (after `--`) the toolkit's programs need from this build: PRIORITY_QUEUES queues
        per port where it has them (trimmed headers overtake the congested queue)."""
        return ["--priority-queues", str(PRIORITY_QUEUES)] if self.priority_queues else []


_BUILDS: dict[tuple[str, float], Bmv2Build] = {}


def probe(binary: str, timeout: float = 10.0) -> Bmv2Build:
    """Run `binary --help` once (per binary and mtime) and read which options it has; SwitchStartError
    saying exactly what is missing if it cannot run the toolkit's switches at all."""
    try:
        key = (binary, os.stat(binary).st_mtime)
    except OSError as e:
        raise SwitchStartError(f"simple_switch_grpc {binary}: {e.strerror or e}") from None
    if key in _BUILDS:
        return _BUILDS[key]
    try:
        proc = subprocess.run([binary, "--help"], capture_output=True, text=True, errors="replace", timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SwitchStartError(f"{binary} --help did not run: {getattr(e, 'strerror', None) or e}") from None
    text = proc.stdout + proc.stderr
    missing = [opt for opt in ("--no-p4", "--device-id", "--log-file") if opt not in text]
    if missing:
        first = text.strip().splitlines()[0][:120] if text.strip() else "(no output)"
        raise SwitchStartError(f"{binary} is not a simple_switch_grpc the lab can run: its --help lists no "
                               f"{', '.join(missing)} (it says: {first})")
    build = _BUILDS[key] = Bmv2Build(binary, "--thrift-port" in text, "--notifications-addr" in text,
                                       "--priority-queues" in text)
    return build


def fresh_logs(paths: Iterable[Path]) -> None:
    """Remove an earlier run's logs before a switch starts, so an error never quotes them."""
    for path in paths:
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class ServerTls:
    """simple_switch_grpc's own TLS for its P4Runtime server: its certificate and key, and with
    `client_ca` mutual TLS (only clients whose certificate that CA signed are let in)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def args(self) -> list[str]:
        """The target options (after `--`) that turn it on."""
        out = ["--grpc-server-ssl", "--grpc-server-cert", str(self.cert), "--grpc-server-key", str(self.key)]
        if self.client_ca is not None:
            out += ["--grpc-server-cacert", str(self.client_ca), "--grpc-server-with-client-auth"]
        return out


def command(build: Bmv2Build, *, device_id: int, thrift_port: int, log_base: Path, log_level: str,
            notifications: Path, pcap_dir: Path | None, ports: dict[int, str], grpc_addr: str, cpu_port: int,
            server_tls: ServerTls | None = None) -> list[str]:
    """The simple_switch_grpc command line for a switch (no program: `--no-p4`), with only the options
    the binary was built with: no `--thrift-port` without Thrift, no `--notifications-addr` without
    nanomsg. `ports` maps bmv2 port -> interface; `log_base` gets bmv2's `.txt` appended."""
    cmd = [build.binary, "--device-id", str(device_id)]
    if build.thrift:  # a build without Thrift runs without its runtime server (the toolkit needs none)
        cmd += ["--thrift-port", str(thrift_port)]
    cmd += ["--log-file", str(log_base), "--log-flush", "--log-level", log_level]
    if build.nanomsg:  # without nanomsg there are no notifications to place
        cmd += ["--notifications-addr", f"ipc://{notifications}"]
    if pcap_dir is not None:
        cmd.append(f"--pcap={pcap_dir}")
    for port, intf in sorted(ports.items()):
        cmd += ["-i", f"{port}@{intf}"]
    cmd += ["--no-p4", "--", "--grpc-server-addr", grpc_addr, "--cpu-port", str(cpu_port), *build.target_args()]
    return cmd + (server_tls.args() if server_tls is not None else [])


def log_tail(paths: Iterable[Path], lines: int = 5) -> str:
    """The last lines of a switch's logs, joined on one line for an error message."""
    text = ""
    for path in paths:
        if path.exists():
            text += path.read_text(errors="replace")[-1000:]
    return " | ".join(text.strip().splitlines()[-lines:]) or "(no output)"


def wait_grpc_ready(address: str, proc: subprocess.Popen | None, deadline: float, who: str,
                    logs: Iterable[Path], tls: TlsConfig | None = None) -> None:
    """Return once the gRPC server at `address` accepts connections (over TLS with `tls`).

    SwitchStartError, with the logs' tail, if the process exits or `deadline`
    (time.monotonic()) passes first.
    """
    logs = list(logs)
    channel = tls_channel(address, tls)
    try:
        while True:
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                raise SwitchStartError(f"{who}: simple_switch_grpc exited ({code}): {log_tail(logs)}")
            try:
                grpc.channel_ready_future(channel).result(timeout=0.25)
                return
            except grpc.FutureTimeoutError:
                if time.monotonic() > deadline:
                    raise SwitchStartError(f"{who}: no gRPC server at {address}: {log_tail(logs)}") from None
    finally:
        channel.close()


def alive(pid: int) -> bool:
    """True while a process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop_process(pid: int, proc: subprocess.Popen | None = None, grace: float = 3.0) -> None:
    """SIGTERM a process, SIGKILL it after `grace` seconds; reap it if it is our child."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    end = time.monotonic() + grace
    while time.monotonic() < end:
        if proc is not None:
            if proc.poll() is not None:
                return
        elif not alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if proc is not None:
        proc.wait()
