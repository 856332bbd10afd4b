"""The simple_switch_grpc process: which build runs, its port poll, waiting for its gRPC server, the tail
of its logs, stopping it."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import grpc

from controller.model.topology import Topology
from controller.programs.bmv2build import Bmv2Traits, traits
from controller.programs.toolchain import find_binary
from controller.runtime.channelready import close as close_channel, wait_ready
from controller.runtime.tls import channel as tls_channel
from controller.model.tlsconfig import TlsConfig


PRIORITY_QUEUES = 2  # queue 0 for traffic, 1 (TRIM_PRIORITY in p4/include/defines.p4) served first
PACKET_LOG_LEVELS = ("debug", "trace")  # the levels bmv2 logs every packet at: only the logging build does
THROUGHPUT_DIR = Path("..") / "perf" / "bin"  # the throughput build, relative to the toolchain's bin
PORT_POLL_VARIABLE = "BM_PORT_MONITOR_MS"  # patches/bmv2-port-monitor-interval.patch: port status poll, ms
# The labs' port poll: a lost carrier reaches the switch's watch-port enforcement within this, where a stock
# bmv2 polls every 200 ms. Its cost, measured on this machine type: docs/performance.md "Port poll".
DEFAULT_PORT_POLL_MS = 10
PORT_POLL_RANGE = (1, 60000)


def lab_binary(log_level: str = "warn") -> str | None:
    """The simple_switch_grpc a lab or bench runs: the throughput build (`$P4_TOOLCHAIN_BIN/../perf/bin`,
    beside the one found) where it exists, unless `log_level` asks for per-packet logs, which only the
    logging build writes. A binary named by $SIMPLE_SWITCH_GRPC runs as named. None: none found."""
    found = find_binary("simple_switch_grpc")
    if found is None or os.environ.get("SIMPLE_SWITCH_GRPC") or log_level in PACKET_LOG_LEVELS:
        return found
    fast = os.path.normpath(Path(found).parent / THROUGHPUT_DIR / "simple_switch_grpc")
    return fast if os.access(fast, os.X_OK) else found


def port_poll_ms() -> int:
    """The port poll the lab's switches get: $BM_PORT_MONITOR_MS when set (`fabricctl lab up
    --port-poll-ms` sets it), else DEFAULT_PORT_POLL_MS. ValueError naming the variable when it is no
    integer in 1-60000 (bmv2 would fall back to 200 ms with one line in a log nobody reads)."""
    text = os.environ.get(PORT_POLL_VARIABLE, "").strip()
    if not text:
        return DEFAULT_PORT_POLL_MS
    lo, hi = PORT_POLL_RANGE
    if not text.isdigit() or not lo <= int(text) <= hi:
        raise ValueError(f"{PORT_POLL_VARIABLE}={text!r} is not a whole number of milliseconds in {lo}-{hi}")
    return int(text)


def build_of(argv: list[str]) -> dict[str, object]:
    """Which build, and which port poll (None: bmv2's own 200 ms), a recorded switch command line runs."""
    poll: int | None = None
    i = 1 if argv[:1] == ["env"] else 0
    while i and i < len(argv) and "=" in argv[i]:
        name, _, value = argv[i].partition("=")
        if name == PORT_POLL_VARIABLE and value.isdigit():
            poll = int(value)
        i += 1
    binary = argv[i] if i < len(argv) else ""
    return {**traits(binary).as_dict(), "port_poll_ms": poll}


def lab_builds(switches: dict[str, dict[str, object]]) -> list[dict[str, object]]:
    """The distinct builds (and port polls) a lab's switches run, from their recorded command lines."""
    out: list[dict[str, object]] = []
    for sw in switches.values():
        argv = sw.get("argv")
        if isinstance(argv, list) and argv:
            build = build_of([str(a) for a in argv])
            if build not in out:
                out.append(build)
    return out


def with_watch_ports(model: Topology, build: Bmv2Traits) -> tuple[Topology, str | None]:
    """The lab's topology with watch ports on where the build survives a group whose members are all down
    (switch-local failover by default), and the line to print where they stay off (None when on, or
    when the topology asks for them itself)."""
    if model.watch_ports:
        return model, None
    if build.watch_ports_safe:
        return dataclasses.replace(model, watch_ports=True), None
    return model, build.watch_ports_line()


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
            server_tls: ServerTls | None = None, poll_ms: int | None = None) -> list[str]:
    """The simple_switch_grpc command line for a switch (no program: `--no-p4`), with only the options
    the binary was built with: no `--thrift-port` without Thrift, no `--notifications-addr` without
    nanomsg. `ports` maps bmv2 port -> interface; `log_base` gets bmv2's `.txt` appended. With
    `poll_ms`, run through `env BM_PORT_MONITOR_MS=...`, so that the command line alone (what a
    restart runs again) carries the port poll; env execs the switch, which keeps its PID."""
    cmd = [] if poll_ms is None else ["env", f"{PORT_POLL_VARIABLE}={poll_ms}"]
    cmd += [build.binary, "--device-id", str(device_id)]
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
        state = wait_ready(channel, max(deadline - time.monotonic(), 0.25),
                           keep_waiting=lambda: proc is not None and proc.poll() is None)
    finally:
        close_channel(channel)  # after gRPC's connectivity poller has ended (controller.runtime.channelready)
    if state is grpc.ChannelConnectivity.READY:
        return
    if proc is None or proc.poll() is not None:
        code = None if proc is None else proc.returncode
        raise SwitchStartError(f"{who}: simple_switch_grpc exited ({code}): {log_tail(logs)}")
    raise SwitchStartError(f"{who}: no gRPC server at {address}: {log_tail(logs)}")


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
