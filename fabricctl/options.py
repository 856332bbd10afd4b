"""fabricctl's global options: their environment variables, the config file, -v logging, and
accepting them after the subcommand too.

Precedence, highest first: the command line, the environment (FABRIC_*), the config file
(--config FILE or FABRIC_CONFIG; YAML with the options' names as keys), the built-in default.
"""

from __future__ import annotations

import logging
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from controller.model import limits
from controller.files.safefile import UnsafeFile
from controller.model.yamlload import YamlError, load_file

# Option name (as on the command line, without --) -> (click parameter name, environment variable, takes a value).
GLOBALS: dict[str, tuple[str, str, bool]] = {
    "topology": ("topology_file", "FABRIC_TOPOLOGY", True),
    "program": ("program", "FABRIC_PROGRAM", True),
    "state": ("state_file", "FABRIC_STATE", True),
    "election-id": ("election_id", "FABRIC_ELECTION_ID", True),
    "timeout": ("timeout", "FABRIC_TIMEOUT", True),
    "verbose": ("verbose", "FABRIC_VERBOSE", False),
    "tls-ca": ("tls_ca", "FABRIC_TLS_CA", True),
    "tls-cert": ("tls_cert", "FABRIC_TLS_CERT", True),
    "tls-key": ("tls_key", "FABRIC_TLS_KEY", True),
    "tls-server-name": ("tls_server_name", "FABRIC_TLS_SERVER_NAME", True),
    "ecn-qdepth": ("ecn_qdepth", "FABRIC_ECN_QDEPTH", True),
    "trim-qdepth": ("trim_qdepth", "FABRIC_TRIM_QDEPTH", True),
    "trim-dscp": ("trim_dscp", "FABRIC_TRIM_DSCP", True),
    "ecn-host-ports": ("ecn_host_ports", "FABRIC_ECN_HOST_PORTS", False),
    "store": ("store_url", "FABRIC_STORE", True),
    "config": ("config", "FABRIC_CONFIG", True),
}
CONFIG_KEYS = [k for k in GLOBALS if k != "config"]
NEGATED = ("no-ecn-host-ports",)  # the off form of a global on/off flag, hoisted like it
_TLS_FILES = ("tls-ca", "tls-cert", "tls-key")
LOGGER = "controller"


class Seconds(click.ParamType):
    """A timeout in seconds: a finite number in (0, limits.MAX_TIMEOUT] (no nan, inf, bool)."""

    name = "SECONDS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, bool):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{str(value)[:40]!r} is not a number of seconds", param, ctx)
        problem = limits.timeout_problem(seconds)
        if problem:
            self.fail(problem, param, ctx)
        return seconds


MAX_SECONDS = 365 * 86_400.0  # a duration or period option's bound: a year (a thread's wait takes at most ~292 years)


class Finite(click.FloatRange):
    """A FloatRange that also refuses nan and inf (which FloatRange lets through: nan compares false)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number", param, ctx)
        return number


def _config_value(key: str, value: Any, path: Path) -> Any:
    if key == "verbose":
        problem = limits.int_problem(value, 0, 3)
    elif key == "ecn-host-ports":
        problem = None if isinstance(value, bool) else f"expected true or false, got {limits.type_name(value)}"
    elif isinstance(value, bool) or not isinstance(value, (str, int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        problem = f"expected a string or number, got {limits.type_name(value)}"
    else:
        return str(value) if key in ("topology", "state", "store", "program", *_TLS_FILES, "tls-server-name") else value
    if problem:
        raise click.BadParameter(f"{path}: {key}: {problem}", param_hint="'--config'")
    return value


def read_config(path: Path) -> dict[str, Any]:
    """The default_map a config file gives the global options (click.BadParameter, one line, if bad).
    Relative paths in it are relative to the config file's directory."""
    try:
        doc = load_file(path, limits.MAX_CONFIG_BYTES, "config file")
    except FileNotFoundError:
        raise click.BadParameter(f"{path}: no such file", param_hint="'--config'") from None
    except (UnsafeFile, YamlError) as e:
        raise click.BadParameter(str(e), param_hint="'--config'") from None
    except OSError as e:
        raise click.BadParameter(f"{path}: {e.strerror or e}", param_hint="'--config'") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise click.BadParameter(f"{path}: expected a mapping of {', '.join(CONFIG_KEYS)}", param_hint="'--config'")
    out: dict[str, Any] = {}
    for key, value in doc.items():
        norm = str(key).replace("_", "-")
        if norm not in CONFIG_KEYS:
            raise click.BadParameter(f"{path}: unknown key {str(key)[:40]!r} (known: {', '.join(CONFIG_KEYS)})",
                                     param_hint="'--config'")
        value = _config_value(norm, value, path)
        if norm in ("topology", "state", *_TLS_FILES) and not Path(value).is_absolute():
            value = str(path.parent / value)
        out[GLOBALS[norm][0]] = value
    return out


def config_callback(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """The eager --config option: its keys become the defaults of the other global options."""
    if value is not None:
        ctx.default_map = {**(ctx.default_map or {}), **read_config(value)}
    return value


def hoist(args: Sequence[str]) -> list[str]:
    """The arguments with global options given after the subcommand moved in front of it
    (`fabricctl plan --timeout 3` as `fabricctl --timeout 3 plan`); nothing after `--` moves."""
    front: list[str] = []
    rest: list[str] = []
    seen_command = False
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            rest += args[i:]
            break
        name = token[2:].split("=", 1)[0] if token.startswith("--") else None
        is_global = bool(re.fullmatch(r"-v+", token)) or name in GLOBALS or name in NEGATED
        takes = name in GLOBALS and GLOBALS[name][2] and "=" not in token
        chunk = list(args[i:i + 2]) if takes else [token]
        if seen_command and is_global and len(chunk) == (2 if takes else 1):
            front += chunk
        else:
            rest += chunk
            seen_command = seen_command or not token.startswith("-")
        i += len(chunk)
    return front + rest


def setup_logging(verbose: int) -> None:
    """-v: what is written to which switch, per write batch (INFO); -vv: every entity (DEBUG). To stderr."""
    logger = logging.getLogger(LOGGER)
    for handler in [h for h in logger.handlers if getattr(h, "_fabricctl", False)]:
        logger.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler._fabricctl = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("fabricctl: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG)
    logger.propagate = False
