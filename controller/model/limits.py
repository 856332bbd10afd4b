"""The bounds every input is checked against before anything is allocated, and why each is what it is."""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any

from controller.model import sids

MiB = 1 << 20

# File sizes: a 1,152-switch topology YAML is 8 MB and a full MRC one (6,144 switches) tens of MB,
# read record by record; a state file is a few KB.
MAX_TOPOLOGY_BYTES = 256 * MiB
MAX_STATE_BYTES = 4 * MiB
MAX_CONFIG_BYTES = 64 * 1024
MAX_LAB_STATE_BYTES = 16 * MiB
MAX_P4INFO_BYTES = 16 * MiB

# YAML: anchors/aliases are allowed for sharing, but an alias bomb (nested aliases expanding
# exponentially) is refused by the alias count and when aliases expand the document past
# MAX_YAML_NODES values and past twice what was written (a large file without aliases is fine).
MAX_YAML_ALIASES = 256
MAX_YAML_NODES = 4_000_000
MAX_YAML_DEPTH = 64

# The SID plan (docs/sid-plan.md): 4 plane bits, T1 uNs 0x001..0x3FF, T0 uNs 0x400..0xBFF, host
# slots (End.DX6) 0xC00..0xFFE.
MAX_PLANES = sids.MAX_PLANES
MAX_SPINES = sids.T1_MAX - sids.T1_BASE + 1
MAX_LEAVES = sids.T0_MAX - sids.T0_BASE + 1
MAX_HOSTS_PER_LEAF = sids.DX6_MAX - sids.DX6_BASE + 1

# Ports: v1model's PortId_t is bit<9> (0..511); bmv2 drops on 511 and our pipeline reserves 255 as
# the CPU port (docs/pipeline.md), so data ports are 1..510 without 255.
PORT_BITS = 9
MAX_PORT_NUMBER = (1 << PORT_BITS) - 1
DROP_PORT = MAX_PORT_NUMBER
MAX_DATA_PORT = MAX_PORT_NUMBER - 1

# P4Runtime: device_id is a uint64.
MAX_DEVICE_ID = (1 << 64) - 1

# A failure set names at most every link, switch and host port of the largest fabric; far fewer in practice.
MAX_FAILURES = 100_000

# Timeouts in seconds (per connect and per call).
MAX_TIMEOUT = 86_400.0

NAME_MAX = 64
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_HOSTNAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
UNIX_PATH_MAX = 107  # sun_path is 108 bytes with the terminating NUL


def type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a mapping", type(None): "null"}.get(type(value), type(value).__name__)


def name_problem(value: Any) -> str | None:
    """Why `value` is not a safe switch or host name (letters, digits, '.', '_', '-'; 1..64), or None."""
    if not isinstance(value, str):
        return f"expected a name (a string), got {type_name(value)}"
    if not value or len(value) > NAME_MAX:
        return f"name {value[:NAME_MAX]!r} must be 1..{NAME_MAX} characters"
    if not _NAME.match(value) or value in (".", ".."):
        return f"name {value[:NAME_MAX]!r} may hold only letters, digits, '.', '_' and '-'"
    return None


def int_problem(value: Any, low: int, high: int) -> str | None:
    """Why `value` is not an integer in low..high (a bool or a float is not an integer), or None."""
    if not isinstance(value, int) or isinstance(value, bool):
        return f"expected an integer {low}..{high}, got {type_name(value)} {str(value)[:40]!r}"
    if not low <= value <= high:
        return f"{value if abs(value) < 10**30 else 'a huge number'} is out of range {low}..{high}"
    return None


def address_problem(value: Any) -> str | None:
    """Why `value` is not a gRPC address a P4Runtime client can dial ("host:port" with a port
    1..65535, "[v6]:port", or "unix:/absolute/path"), or None."""
    if not isinstance(value, str):
        return f"expected a gRPC address (a string), got {type_name(value)}"
    if value.startswith("unix:"):
        path = value[5:]
        if not path.startswith("/") or len(path.encode()) > UNIX_PATH_MAX or "\0" in path or "\n" in path:
            return f"{value[:80]!r} is not unix:/absolute/path (at most {UNIX_PATH_MAX} bytes)"
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not host:
        return f"{value[:80]!r} is neither host:port nor unix:/path"
    if not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"{value[:80]!r}: port {port[:10]!r} is not a number 1..65535"
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return f"{value[:80]!r}: {host!r} is not an IPv6 address"
        return None
    if len(host) > 253 or not _HOSTNAME.match(host):
        return f"{value[:80]!r}: {host[:80]!r} is not a host name or address"
    return None


def timeout_problem(value: float) -> str | None:
    """Why a timeout is not a finite number of seconds in (0, MAX_TIMEOUT], or None."""
    if math.isnan(value) or math.isinf(value):
        return f"{value} is not a finite number of seconds"
    if not 0 < value <= MAX_TIMEOUT:
        return f"{value:g} is out of range (0, {MAX_TIMEOUT:g}] seconds"
    return None
