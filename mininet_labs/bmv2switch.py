"""Bmv2Switch: bmv2's simple_switch_grpc as a Mininet switch (see mininet_labs.switch); importing this loads Mininet."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from controller.model.tlsconfig import TlsConfig
from mininet_labs._mininet import load
from mininet_labs.bmv2proc import (
    ServerTls,
    SwitchStartError,
    command,
    fresh_logs,
    lab_binary,
    log_tail,
    port_poll_ms,
    probe,
    stop_process,
    wait_grpc_ready,
)
from mininet_labs.switch import CPU_PORT, THRIFT_OFFSET, port_free, quiet_intf

load()
from mininet.node import Switch  # noqa: E402  (after load(): Debian's mininet may need the path set up)


class Bmv2Switch(Switch):
    """simple_switch_grpc as a Mininet switch (root namespace, P4Runtime on 127.0.0.1:grpc_port).

    Parameters (all keyword, also through Topo.addSwitch): device_id, grpc_port, lab_dir (where
    logs go), pcap_dir (None: no pcaps), log_level (bmv2's: trace|debug|info|warn|error|off),
    thrift_port (default grpc_port + 10000), cpu_port (255), binary (default: the throughput build
    where there is one and log_level asks for no per-packet logs, else the one found: bmv2proc.lab_binary),
    port_poll_ms (bmv2's port status poll; default bmv2proc.port_poll_ms()), start_timeout (seconds to wait for the gRPC server), server_tls (the
    switch's own TLS; None: plaintext) and client_tls (how we reach it then, to see it is up).
    """

    def __init__(self, name: str, *, device_id: int, grpc_port: int, lab_dir: str | Path,
                 pcap_dir: str | Path | None = None, log_level: str = "warn", thrift_port: int | None = None,
                 cpu_port: int = CPU_PORT, binary: str | None = None, start_timeout: float = 30.0,
                 server_tls: ServerTls | None = None, client_tls: TlsConfig | None = None,
                 port_poll_ms: int | None = None, **params: Any) -> None:
        params.setdefault("dpid", f"{device_id:x}")
        params["inNamespace"] = False  # Mininet passes its default (True for hosts); switches stay in the root
        super().__init__(name, **params)
        self.device_id = device_id
        self.grpc_port = grpc_port
        self.thrift_port = thrift_port if thrift_port is not None else grpc_port + THRIFT_OFFSET
        self.lab_dir = Path(lab_dir)
        self.pcap_dir = None if pcap_dir is None else Path(pcap_dir)
        self.log_level = log_level
        self.cpu_port = cpu_port
        self.binary = binary
        self.port_poll_ms = port_poll_ms
        self.start_timeout = start_timeout
        self.server_tls = server_tls
        self.client_tls = client_tls
        self.proc: subprocess.Popen[bytes] | None = None

    # --- what it is -------------------------------------------------------------------------
    @property
    def grpc_addr(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def log_path(self) -> Path:
        return self.lab_dir / f"{self.name}.txt"  # bmv2 appends .txt to --log-file

    @property
    def out_path(self) -> Path:
        return self.lab_dir / f"{self.name}.out"

    @property
    def switch_pid(self) -> int | None:
        """The PID of simple_switch_grpc (not of Mininet's shell for this node)."""
        return None if self.proc is None else self.proc.pid

    def data_ports(self) -> dict[int, str]:
        """bmv2 port -> interface name, for every link of this switch (not the loopback)."""
        return {port: intf.name for intf, port in self.ports.items() if port > 0 and intf.name != "lo"}

    def command(self) -> list[str]:
        """The simple_switch_grpc command line."""
        binary = self.binary or lab_binary(self.log_level)
        if binary is None:
            raise SwitchStartError("simple_switch_grpc not found (PATH, $SIMPLE_SWITCH_GRPC or $P4_TOOLCHAIN_BIN)")
        try:
            poll = self.port_poll_ms if self.port_poll_ms is not None else port_poll_ms()
        except ValueError as e:
            raise SwitchStartError(str(e)) from None
        return command(probe(binary), device_id=self.device_id, thrift_port=self.thrift_port,
                       log_base=self.lab_dir / self.name, log_level=self.log_level,
                       notifications=self.lab_dir / f"{self.name}-notifications.ipc", pcap_dir=self.pcap_dir,
                       ports=self.data_ports(), grpc_addr=self.grpc_addr, cpu_port=self.cpu_port,
                       server_tls=self.server_tls, poll_ms=poll)

    # --- Mininet's switch interface ----------------------------------------------------------
    def start(self, controllers: Sequence[Any] = ()) -> None:
        """Launch simple_switch_grpc (readiness is awaited in batchStartup or wait_ready)."""
        for port in (self.grpc_port, self.thrift_port):  # the thrift port stays reserved whatever the build
            if not port_free(port):
                raise SwitchStartError(f"{self.name}: TCP 127.0.0.1:{port} is in use (another lab? "
                                       "'fabricctl lab down' or choose another --grpc-base-port)")
        self.lab_dir.mkdir(parents=True, exist_ok=True)
        if self.pcap_dir is not None:
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
        for intf in self.data_ports().values():
            quiet_intf(intf)
        cmd = self.command()
        fresh_logs([self.log_path])
        with open(self.out_path, "wb") as out:
            out.write(("$ " + " ".join(cmd) + "\n").encode())
            out.flush()
            # Own session: a Ctrl-C at the Mininet CLI must not reach the switches.
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    @classmethod
    def batchStartup(cls, switches: Iterable[Bmv2Switch], **_: Any) -> list[Bmv2Switch]:  # noqa: N802 (Mininet's name)
        """Mininet calls this after start() of every switch: wait until each gRPC server answers."""
        switches = list(switches)
        deadline = time.monotonic() + max((s.start_timeout for s in switches), default=30.0)
        for s in switches:
            s.wait_ready(deadline)
        return switches

    def wait_ready(self, deadline: float | None = None) -> None:
        """Wait until the gRPC server accepts connections; SwitchStartError with the log's tail otherwise."""
        deadline = deadline if deadline is not None else time.monotonic() + self.start_timeout
        wait_grpc_ready(self.grpc_addr, self.proc, deadline, self.name, (self.out_path, self.log_path),
                        self.client_tls)

    def log_tail(self, lines: int = 5) -> str:
        return log_tail((self.out_path, self.log_path), lines)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 (Mininet's name)
        """Terminate simple_switch_grpc (SIGTERM, then SIGKILL), then Mininet's own stop."""
        if self.proc is not None:
            stop_process(self.proc.pid, self.proc)
            self.proc = None
        super().stop(deleteIntfs)

