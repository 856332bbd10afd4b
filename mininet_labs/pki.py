"""A throwaway PKI for labs and tests, made with the openssl CLI (the commands of docs/guide/cli.md, TLS on P4Runtime): a CA, a switch
certificate for localhost and 127.0.0.1, and a client certificate for the controller."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
SERVER_EXT = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth"
CLIENT_EXT = "extendedKeyUsage=clientAuth"


class PkiError(RuntimeError):
    """openssl is missing or failed; the message says which command and why."""


def openssl() -> str | None:
    return shutil.which("openssl")


def _run(d: Path, *args: str) -> None:
    binary = openssl()
    if binary is None:
        raise PkiError("openssl not found on PATH (needed to make the TLS certificates; apt-get install openssl)")
    proc = subprocess.run([binary, *args], cwd=d, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-2:])
        raise PkiError(f"openssl {args[0]} failed ({proc.returncode}): {tail}")


def make_ca(d: Path, name: str, days: int = 30) -> tuple[Path, Path]:
    """A self-signed CA in `d`: (certificate, key)."""
    _run(d, "req", "-x509", *EC_KEY, "-days", str(days), "-subj", f"/CN={name}",
         "-keyout", f"{name}.key", "-out", f"{name}.crt")
    return d / f"{name}.crt", d / f"{name}.key"


def make_cert(d: Path, name: str, ca: tuple[Path, Path], extensions: str, days: int = 30) -> tuple[Path, Path]:
    """A certificate signed by `ca` with these x509v3 extensions, in `d`: (certificate, key)."""
    (d / f"{name}.ext").write_text(extensions + "\n")
    _run(d, "req", "-new", *EC_KEY, "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.csr")
    _run(d, "x509", "-req", "-in", f"{name}.csr", "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
         "-days", str(days), "-extfile", f"{name}.ext", "-out", f"{name}.crt")
    return d / f"{name}.crt", d / f"{name}.key"


@dataclass(frozen=True)
class Pki:
    """Where each file is (all in `dir`)."""

    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_pki(d: Path) -> Pki:
    """fabric-ca.crt, switch.crt/.key (localhost, 127.0.0.1) and fabricctl.crt/.key in `d`."""
    d.mkdir(parents=True, exist_ok=True)
    ca = make_ca(d, "fabric-ca")
    server = make_cert(d, "switch", ca, SERVER_EXT)
    client = make_cert(d, "fabricctl", ca, CLIENT_EXT)
    return Pki(d, ca[0], *server, *client)
