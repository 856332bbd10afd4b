"""TLS on P4Runtime channels: the CA, certificate and key of a switch, checking them, gRPC credentials, diagnosis."""

from __future__ import annotations

import os
import socket
import ssl
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from controller.model.tlsconfig import TlsConfig, TlsError

MAX_PEM_BYTES = 1 << 20  # a CA bundle, certificate or key larger than this is not one
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + an empty SETTINGS frame


@dataclass(frozen=True, slots=True)
class Material:
    """The PEM bytes of a TlsConfig, checked: what gRPC's channel credentials are made of."""

    root_certificates: bytes | None
    certificate_chain: bytes | None
    private_key: bytes | None


# --- the files ---------------------------------------------------------------------------------

def _read(path: Path, what: str) -> bytes:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise TlsError(f"TLS {what} {path} is not a regular file")
        if st.st_size > MAX_PEM_BYTES:
            raise TlsError(f"TLS {what} {path} is {st.st_size} bytes, more than a PEM file of {MAX_PEM_BYTES} bytes")
        with open(path, "rb") as f:
            data = f.read(MAX_PEM_BYTES + 1)
    except OSError as e:
        raise TlsError(f"cannot read TLS {what} {path}: {e.strerror or e}") from None
    if len(data) > MAX_PEM_BYTES:
        raise TlsError(f"TLS {what} {path} is more than {MAX_PEM_BYTES} bytes")
    return data


def _no_password() -> bytes:
    raise TlsError("encrypted")


def load(config: TlsConfig) -> Material:
    """Read and check the files of a TlsConfig: each a readable PEM file of the right kind, the key
    unencrypted and matching the certificate. TlsError naming the file otherwise."""
    roots = chain = key = None
    if config.ca is not None:
        roots = _read(config.ca, "CA certificate")
        if b"-----BEGIN CERTIFICATE-----" not in roots:
            raise TlsError(f"TLS CA certificate {config.ca} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=roots.decode("ascii", "replace"))
        except ssl.SSLError as e:
            raise TlsError(f"TLS CA certificate {config.ca} is not a valid PEM certificate: {e.reason or e}") from None
    if config.cert is not None and config.key is not None:
        chain = _read(config.cert, "certificate")
        key = _read(config.key, "key")
        if b"-----BEGIN CERTIFICATE-----" not in chain:
            raise TlsError(f"TLS certificate {config.cert} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        if b"ENCRYPTED" in key:
            raise TlsError(f"TLS key {config.key} is encrypted: gRPC needs it unencrypted "
                           f"(openssl pkey -in {config.key} -out plain.key)")
        if b"PRIVATE KEY-----" not in key:
            raise TlsError(f"TLS key {config.key} holds no PEM private key (-----BEGIN ... PRIVATE KEY-----)")
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(config.cert, config.key, password=_no_password)
        except (ssl.SSLError, TlsError) as e:
            reason = getattr(e, "reason", None)
            if reason == "KEY_VALUES_MISMATCH":
                raise TlsError(f"TLS key {config.key} is not the key of certificate {config.cert}") from None
            raise TlsError(f"TLS certificate {config.cert} and key {config.key} do not load: {reason or e}") from None
        except OSError as e:
            raise TlsError(f"cannot read TLS certificate {config.cert} or key {config.key}: {e.strerror or e}") from None
    return Material(roots, chain, key)


def check_all(configs: Sequence[TlsConfig | None]) -> None:
    """load() each distinct configuration once; the first TlsError."""
    for config in dict.fromkeys(c for c in configs if c is not None):
        load(config)


# --- gRPC --------------------------------------------------------------------------------------

def target_name(address: str, config: TlsConfig) -> str | None:
    """The name the switch's certificate must hold, where it is not the address's host."""
    if config.server_name:
        return config.server_name
    return "localhost" if address.startswith("unix:") else None


def channel(address: str, config: TlsConfig | None, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """A gRPC channel to a P4Runtime server: plaintext without a config, else TLS (TlsError on its files)."""
    if config is None:
        return grpc.insecure_channel(address, options=list(options))
    material = load(config)
    credentials = grpc.ssl_channel_credentials(material.root_certificates, material.private_key,
                                               material.certificate_chain)
    name = target_name(address, config)
    extra = [("grpc.ssl_target_name_override", name)] if name else []
    return grpc.secure_channel(address, credentials, options=[*options, *extra])


# --- why a channel does not come up ------------------------------------------------------------

def _split(address: str) -> tuple[int, Any, str | None] | None:
    """(family, sockaddr, host) of a unix:/path or host:port address; None for other forms."""
    if address.startswith("unix:"):
        path = address[len("unix:"):]
        path = "/" + path.lstrip("/") if path.startswith("//") else path
        return socket.AF_UNIX, path, None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    host = host.strip("[]") or "localhost"
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0]
    except (OSError, ValueError):
        return None
    return family, sockaddr, host


def explain(address: str, config: TlsConfig | None, timeout: float) -> str | None:
    """Why a P4Runtime channel with this TLS setting cannot talk to the server at `address`, found by a
    TLS handshake of our own; None when the server is not listening or TLS is not the problem."""
    where = _split(address)
    if where is None:
        return None
    family, sockaddr, host = where
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(sockaddr)
    except OSError:
        sock.close()
        return None
    with sock:
        if config is None:
            return _plaintext_refused(sock, address)
        return _tls_refused(sock, address, config, host)


def _plaintext_refused(sock: socket.socket, address: str) -> str | None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    try:
        ctx.wrap_socket(sock).close()
    except (ssl.SSLError, OSError):
        return None
    return (f"{address} speaks TLS and we connect in plaintext: give the CA that signed its certificate "
            "(--tls-ca FILE, or tls: in the topology)")


def _tls_refused(sock: socket.socket, address: str, config: TlsConfig, host: str | None) -> str | None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.set_alpn_protocols(["h2"])
    try:
        if config.ca is not None:
            ctx.load_verify_locations(cafile=config.ca)
        else:
            ctx.load_default_certs()
        if config.cert is not None:
            ctx.load_cert_chain(config.cert, config.key, password=_no_password)
    except (OSError, ssl.SSLError, TlsError) as e:
        return f"TLS files of {address} do not load: {e}"
    name = target_name(address, config) or host
    try:
        tls = ctx.wrap_socket(sock, server_hostname=name)
    except ssl.SSLCertVerificationError as e:
        hint = (f"; the certificate does not name {name!r}: set the name it holds with --tls-server-name "
                "(or server_name under tls:)") if e.verify_code == 62 else (
                f"; is it signed by the CA in {config.ca}?" if config.ca is not None else "")
        return f"the TLS certificate of {address} is not trusted: {e.verify_message}{hint}"
    except TimeoutError:
        return None
    except ssl.SSLError as e:
        if e.reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"):
            return f"{address} does not speak TLS (a plaintext P4Runtime server?): the TLS handshake failed: {e.reason}"
        return f"the TLS handshake with {address} failed: {e.reason or e}{_client_hint(config)}"
    except OSError as e:
        return f"{address} closed the connection during the TLS handshake ({e.strerror or e}){_client_hint(config)}"
    try:
        with tls:
            tls.sendall(_H2_PREFACE)
            if tls.recv(1):
                return None
            raise ssl.SSLEOFError("closed")
    except TimeoutError:
        return None
    except (ssl.SSLError, OSError):
        if config.cert is None:
            return (f"{address} closed the connection after the TLS handshake: it requires a client "
                    "certificate (--tls-cert FILE --tls-key FILE, or cert and key under tls: in the topology)")
        return (f"{address} refused our client certificate {config.cert} (it closed the connection after the "
                "TLS handshake): is the certificate signed by a CA the switch trusts?")


def _client_hint(config: TlsConfig) -> str:
    return ("; does it require a client certificate (--tls-cert/--tls-key)?" if config.cert is None else
            f"; does it trust the CA that signed {config.cert}?")
