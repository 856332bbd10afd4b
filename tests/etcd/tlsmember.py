"""A real one-member etcd serving its clients over TLS on loopback (client certificates required), with a
throwaway PKI made by openssl (mininet_labs.pki): the CA, the member's certificate, a client's."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from mininet_labs.pki import make_ca, make_cert
from tests.etcd.cluster import free_ports

# etcd 3.4's HTTP gateway dials the member's own gRPC with the member's certificate as its client
# certificate, so with --client-cert-auth the member's certificate must allow both uses
MEMBER_EXT = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth"
CLIENT_EXT = "extendedKeyUsage=clientAuth"


@dataclass
class TlsMember:
    """start(): the member answers https://127.0.0.1:client to a client with `client_cert`."""

    root: Path
    proc: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        pki = self.root / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        ca = make_ca(pki, "etcd-ca")
        self.ca = ca[0]
        self.member_cert, self.member_key = make_cert(pki, "member", ca, MEMBER_EXT)
        self.client_cert, self.client_key = make_cert(pki, "client", ca, CLIENT_EXT)
        other = make_ca(pki, "other-ca")  # a CA that signed nothing here
        self.other_ca = other[0]
        self.stranger_cert, self.stranger_key = make_cert(pki, "stranger", other, CLIENT_EXT)
        self.client, self.peer = free_ports(2)

    def url(self, ca: Path | None = None, cert: Path | None = None, key: Path | None = None) -> str:
        q = "&".join(f"{k}={v}" for k, v in (("ca", ca or self.ca), ("cert", cert or self.client_cert),
                                                  ("key", key or self.client_key)))
        return f"etcd+https://127.0.0.1:{self.client}?{q}"

    def start(self, timeout: float = 30.0) -> None:
        argv = [shutil.which("etcd") or "etcd", "--name", "t0", "--data-dir", str(self.root / "data"),
                "--listen-client-urls", f"https://127.0.0.1:{self.client}",
                "--advertise-client-urls", f"https://127.0.0.1:{self.client}",
                "--listen-peer-urls", f"http://127.0.0.1:{self.peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer}",
                "--initial-cluster", f"t0=http://127.0.0.1:{self.peer}", "--initial-cluster-state", "new",
                "--cert-file", str(self.member_cert), "--key-file", str(self.member_key),
                "--trusted-ca-file", str(self.ca), "--client-cert-auth", "--log-level", "warn"]
        log = open(self.root / "etcd.log", "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                r = requests.get(f"https://127.0.0.1:{self.client}/health", verify=str(self.ca),
                                 cert=(str(self.client_cert), str(self.client_key)), timeout=1.0)
                if r.ok and r.json().get("health") == "true":
                    return
            except (requests.RequestException, ValueError):
                pass
            assert self.proc.poll() is None, (self.root / "etcd.log").read_text()[-2000:]
            time.sleep(0.2)
        raise RuntimeError(f"etcd with TLS not healthy within {timeout} s (log {self.root / 'etcd.log'})")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None
