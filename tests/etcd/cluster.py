"""A real three-member etcd cluster on loopback ports, each member with its own data directory."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@dataclass
class Member:
    name: str
    client: int
    peer: int
    data: Path
    log: Path
    proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client}"


@dataclass
class EtcdCluster:
    """Members m0..m2; start() waits until the cluster has a leader."""

    root: Path
    size: int = 3
    members: list[Member] = field(default_factory=list)

    def __post_init__(self) -> None:
        ports = free_ports(2 * self.size)
        for i in range(self.size):
            d = self.root / f"m{i}"
            d.mkdir(parents=True, exist_ok=True)
            self.members.append(Member(f"m{i}", ports[2 * i], ports[2 * i + 1], d / "data", d / "etcd.log"))

    @property
    def url(self) -> str:
        return "etcd://" + ",".join(m.endpoint for m in self.members)

    def _argv(self, m: Member) -> list[str]:
        initial = ",".join(f"{x.name}=http://127.0.0.1:{x.peer}" for x in self.members)
        return [shutil.which("etcd") or "etcd", "--name", m.name, "--data-dir", str(m.data),
                "--listen-client-urls", f"http://127.0.0.1:{m.client}",
                "--advertise-client-urls", f"http://127.0.0.1:{m.client}",
                "--listen-peer-urls", f"http://127.0.0.1:{m.peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{m.peer}",
                "--initial-cluster", initial, "--initial-cluster-token", f"t-{self.members[0].client}",
                "--initial-cluster-state", "new", "--heartbeat-interval", "100", "--election-timeout", "1000",
                "--log-level", "warn"]

    def start_member(self, m: Member) -> None:
        log = open(m.log, "ab")
        m.proc = subprocess.Popen(self._argv(m), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self, timeout: float = 30.0) -> None:
        for m in self.members:
            self.start_member(m)
        self.wait_healthy(timeout)

    def healthy(self, m: Member) -> bool:
        try:
            r = requests.get(f"http://{m.endpoint}/health", timeout=1.0)
            return r.ok and r.json().get("health") == "true"
        except (requests.RequestException, ValueError):
            return False

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            live = [m for m in self.members if m.proc is not None and m.proc.poll() is None]
            if live and all(self.healthy(m) for m in live):
                return
            time.sleep(0.2)
        raise RuntimeError(f"etcd cluster not healthy within {timeout} s (logs under {self.root})")

    def kill(self, m: Member) -> None:
        if m.proc is not None and m.proc.poll() is None:
            m.proc.send_signal(signal.SIGKILL)
            m.proc.wait(10)
        m.proc = None

    def restart(self, m: Member) -> None:
        argv = self._argv(m)
        argv[argv.index("new")] = "existing"
        log = open(m.log, "ab")
        m.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        for m in self.members:
            if m.proc is not None and m.proc.poll() is None:
                m.proc.terminate()
        for m in self.members:
            if m.proc is not None:
                try:
                    m.proc.wait(10)
                except subprocess.TimeoutExpired:
                    m.proc.kill()
                    m.proc.wait(5)
            m.proc = None
