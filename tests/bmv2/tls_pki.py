"""Certificates made at test time with the openssl CLI, by the README's commands: a CA, a switch
(server) certificate for localhost and 127.0.0.1, a client certificate, and a second CA with a
client certificate of its own (one the switch must refuse)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def require_openssl() -> str:
    """The openssl binary, or skip naming it."""
    binary = shutil.which("openssl")
    if binary is None:
        pytest.skip("openssl not found on PATH (the TLS tests make their certificates with it)")
    return binary


def _run(*args: str, cwd: Path) -> None:
    proc = subprocess.run([require_openssl(), *args], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, f"openssl {' '.join(args)}: {proc.stderr}"


def make_ca(d: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA: (certificate, key)."""
    _run("req", "-x509", *EC_KEY, "-days", "2", "-subj", f"/CN={name}",
         "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=d)
    return d / f"{name}.crt", d / f"{name}.key"


def make_cert(d: Path, name: str, ca: tuple[Path, Path], extensions: str) -> tuple[Path, Path]:
    """A certificate signed by `ca` with these x509v3 extensions: (certificate, key)."""
    (d / f"{name}.ext").write_text(extensions + "\n")
    _run("req", "-new", *EC_KEY, "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
         "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)
    return d / f"{name}.crt", d / f"{name}.key"


SERVER_EXT = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth"
CLIENT_EXT = "extendedKeyUsage=clientAuth"


@dataclass(frozen=True)
class Pki:
    """Where each file is (all in one directory)."""

    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    other_cert: Path
    other_key: Path


def make_pki(d: Path) -> Pki:
    d.mkdir(parents=True, exist_ok=True)
    ca = make_ca(d, "fabric-ca")
    server = make_cert(d, "switch", ca, SERVER_EXT)
    client = make_cert(d, "fabricctl", ca, CLIENT_EXT)
    other_ca = make_ca(d, "other-ca")
    other = make_cert(d, "intruder", other_ca, CLIENT_EXT)
    return Pki(d, ca[0], *server, *client, other_ca[0], *other)
