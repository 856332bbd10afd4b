"""One bmv2 simple_switch_grpc in its own network namespace, its ports wired to veth ends we drive."""

from __future__ import annotations

import select
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


from controller.programs.toolchain import find_binary
from mininet_labs import netns
from controller.model.tlsconfig import TlsConfig
from mininet_labs.bmv2proc import ServerTls, SwitchStartError, fresh_logs, probe, stop_process, wait_grpc_ready

CPU_PORT = 255




@dataclass
class NetnsSwitch:
    """simple_switch_grpc in namespace `ns`: switch port n is veth `swN`, we hold its peer `hN`.

    The gRPC server listens on a unix socket (namespace-independent), so a controller in
    the root namespace reaches it while the data ports stay inside the namespace; `grpc_addr`
    (e.g. 127.0.0.1:9559) puts it on TCP inside the namespace instead. `server_tls` turns on the
    switch's own TLS; `client_tls` is how we then reach it (to see it is up).
    """

    ns: str
    ports: tuple[int, ...] = (1, 2, 3, 4)
    device_id: int = 1
    workdir: Path | None = None
    # port -> namespace (already made by the caller) that gets the far end `hN` of that port
    foreign_ports: dict[int, str] = field(default_factory=dict)
    log_level: str = "warn"
    grpc_addr: str | None = None
    server_tls: ServerTls | None = None
    client_tls: TlsConfig | None = None
    # the simple_switch_grpc to run (None: the one found, the logging build; benches pass bmv2proc.lab_binary())
    binary: str | None = None
    _proc: subprocess.Popen | None = None
    _socks: dict[int, socket.socket] = field(default_factory=dict)
    _own_workdir: bool = False

    @property
    def grpc_address(self) -> str:
        if self.grpc_addr is not None:
            return self.grpc_addr
        assert self.workdir is not None
        return f"unix:{self.workdir / 'p4rt.sock'}"

    @property
    def log_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "bmv2.log"

    def host_iface(self, port: int) -> str:
        return f"h{port}"

    def start(self, timeout: float = 20.0) -> "NetnsSwitch":
        binary = self.binary or find_binary("simple_switch_grpc")
        if binary is None:
            raise SwitchStartError("simple_switch_grpc not found (PATH, $SIMPLE_SWITCH_GRPC or $P4_TOOLCHAIN_BIN)")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.ns}-"))
            self._own_workdir = True
        netns.add_netns(self.ns)
        try:
            for port in (*self.ports, *self.foreign_ports):
                netns.add_veth(self.ns, f"sw{port}", self.host_iface(port))
            for port, other in self.foreign_ports.items():
                netns.run("ip", "link", "set", self.host_iface(port), "netns", other, ns=self.ns)
                netns.run("ip", "link", "set", self.host_iface(port), "up", ns=other)
            ifaces = [f"{p}@sw{p}" for p in (*self.ports, *self.foreign_ports)]
            build = probe(binary)
            fresh_logs(self._logs())
            cmd = ["ip", "netns", "exec", self.ns, binary, "--device-id", str(self.device_id),
                   "--log-file", str(self.workdir / "bmv2"), "--log-flush",
                   "--log-level", self.log_level, "--no-p4"]
            for iface in ifaces:
                cmd += ["-i", iface]
            cmd += ["--", "--grpc-server-addr", self.grpc_address, "--cpu-port", str(CPU_PORT), *build.target_args()]
            if self.server_tls is not None:
                cmd += self.server_tls.args()
            self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                          stderr=open(self.workdir / "stderr.log", "w"))
            self._wait_ready(timeout)
            socks = netns.open_raw_sockets(self.ns, [self.host_iface(p) for p in self.ports])
            self._socks = {p: socks[self.host_iface(p)] for p in self.ports}
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        if self.grpc_addr is not None:  # TCP inside the namespace: ask from there
            deadline = time.monotonic() + timeout
            port = self.grpc_addr.rpartition(":")[2]
            while not netns.run("ss", "-ltnH", f"sport = :{port}", ns=self.ns, check=False).stdout.strip():
                if self._proc is None or self._proc.poll() is not None or time.monotonic() > deadline:
                    raise SwitchStartError(f"{self.ns}: no gRPC server at {self.grpc_addr}")
                time.sleep(0.1)
            return
        wait_grpc_ready(self.grpc_address, self._proc, time.monotonic() + timeout, self.ns, self._logs(),
                        self.client_tls)

    def _logs(self) -> tuple[Path, ...]:
        assert self.workdir is not None
        return (self.workdir / "stderr.log", self.workdir / "bmv2.log")

    def stop(self) -> None:
        for sock in self._socks.values():
            sock.close()
        self._socks = {}
        if self._proc is not None:
            stop_process(self._proc.pid, self._proc, grace=5.0)
        self._proc = None
        netns.delete_netns(self.ns)
        if self._own_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "NetnsSwitch":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- packet I/O on the host side of the veths -----------------------------------

    def send(self, port: int, frame: bytes) -> None:
        self._socks[port].send(bytes(frame))

    def drain(self) -> None:
        """Throw away whatever is queued on our ends."""
        self.receive(timeout=0.0)

    def receive(self, timeout: float = 1.0, count: int | None = None) -> list[tuple[int, bytes]]:
        """Frames the switch sent out of its ports: (port, bytes), in arrival order.

        Waits up to `timeout` seconds, or until `count` frames have come.
        """
        by_fd = {s.fileno(): (p, s) for p, s in self._socks.items()}
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + timeout
        while count is None or len(got) < count:
            left = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select(list(by_fd), [], [], left)
            if not ready:
                break
            for fd in ready:
                port, sock = by_fd[fd]
                data, addr = sock.recvfrom(65535)
                if addr[2] == netns.PACKET_OUTGOING:
                    continue  # our own transmission, seen on the way out
                got.append((port, data))
        return got
