"""TLS settings of a switch's P4Runtime channel as the topology and the command line give them (no gRPC here)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

KEYS = ("ca", "cert", "key", "server_name")


class TlsError(ValueError):
    """A TLS setting or file that cannot be used; the message is one line naming it."""


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """TLS for one switch's P4Runtime channel (its presence turns TLS on).

    `ca`: PEM file of the CA(s) that sign the switch's certificate (None: the system's roots);
    `cert` and `key`: our client certificate and its unencrypted key, both or neither (mutual TLS);
    `server_name`: the name to check the switch's certificate against instead of the address's host
    (for a unix: address it defaults to "localhost": gRPC would check the socket path).
    """

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            given, missing = ("certificate", "key") if self.key is None else ("key", "certificate")
            raise TlsError(f"a TLS client {given} needs its {missing} too (cert and key: both or neither)")

    def describe(self) -> str:
        """'mutual TLS (CA ca.pem, cert c.pem)' or 'TLS (CA system roots)', for messages."""
        ca = f"CA {self.ca}" if self.ca is not None else "CA: the system's roots"
        mutual = f", client certificate {self.cert}" if self.cert is not None else ""
        name = f", server name {self.server_name}" if self.server_name else ""
        return f"{'mutual TLS' if self.cert is not None else 'TLS'} ({ca}{mutual}{name})"


# --- where the settings come from --------------------------------------------------------------

def from_options(ca: Path | None, cert: Path | None, key: Path | None, server_name: str | None) -> TlsConfig | None:
    """The TLS options of the command line (None when none is given); TlsError for cert without key."""
    if ca is None and cert is None and key is None and not server_name:
        return None
    if (cert is None) != (key is None):
        raise TlsError("--tls-cert and --tls-key go together (the client certificate and its key)")
    return TlsConfig(ca, cert, key, server_name or None)


def parse(value: Any, where: str, base: Path | None) -> tuple[TlsConfig | bool | None, list[str]]:
    """A topology's `tls:` value: a mapping of ca/cert/key/server_name (paths relative to `base`),
    `true` (TLS with the system's roots), `false` (plaintext, also under a fabric-wide `tls:`) or
    absent (None). Returns the setting and the problems found (each naming `where`)."""
    if value is None:
        return None, []
    if isinstance(value, bool):
        return (TlsConfig() if value else False), []
    if not isinstance(value, Mapping):
        return None, [f"{where}: tls must be a mapping of {', '.join(KEYS)} (or true/false), "
                      f"got {type(value).__name__}"]
    problems = [f"{where}: unknown tls key {k!r} (known: {', '.join(KEYS)})" for k in value if k not in KEYS]
    got: dict[str, Any] = {}
    for k in KEYS:
        v = value.get(k)
        if v is None:
            continue
        if not isinstance(v, str) or not v or "\0" in v:
            problems.append(f"{where}: tls {k} must be a non-empty string, got {v!r}")
        elif k == "server_name":
            got[k] = v
        else:
            path = Path(v).expanduser()
            got[k] = (path if path.is_absolute() or base is None else base / path).absolute()
    if ("cert" in got) != ("key" in got) and not problems:
        problems.append(f"{where}: tls cert and key go together (the client certificate and its key)")
    if problems:
        return None, problems
    return TlsConfig(**got), []


def override(base: TlsConfig | None, top: TlsConfig | None) -> TlsConfig | None:
    """`top`'s settings over `base`'s, field by field (cert and key as one); either may be None."""
    if top is None or base is None:
        return top if base is None else base
    cert, key = (top.cert, top.key) if top.cert is not None else (base.cert, base.key)
    return TlsConfig(top.ca or base.ca, cert, key, top.server_name or base.server_name)


def resolve(fabric: TlsConfig | None, switch: TlsConfig | bool | None) -> TlsConfig | None:
    """A switch's TLS from the fabric-wide `tls:` and its own (`false`: plaintext; absent: the fabric's)."""
    if switch is False:
        return None
    if switch is None or switch is True:
        return fabric if switch is None else override(fabric, TlsConfig())
    assert isinstance(switch, TlsConfig)
    return override(fabric, switch)


def to_doc(config: TlsConfig) -> dict[str, str]:
    """The topology form of a TlsConfig (absolute paths), as `parse` reads it."""
    out: dict[str, str] = {}
    for f in fields(config):
        v = getattr(config, f.name)
        if v is not None:
            out[f.name] = str(Path(v).absolute()) if isinstance(v, Path) else v
    return out
