"""The congestion signals' thresholds (ECN CE marking, trimming): the topology key, the global options, the checks."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import click

from controller.model import limits

QDEPTH_BITS = 19  # bmv2's enq_qdepth (v1model) and set_thresholds' parameters: bit<19>
MAX_QDEPTH = (1 << QDEPTH_BITS) - 1
TRIM_DSCP = 46  # the DSCP a trimmed packet carries unless told otherwise (Expedited Forwarding, RFC 3246)
FIELDS = ("ecn_qdepth", "trim_qdepth", "trim_dscp")  # the integers
HOST_PORTS = "ecn_host_ports"  # the one switch: CE marked on the leaves' host-facing ports too
KEYS = (*FIELDS, HOST_PORTS)
KEY = "congestion"  # the topology key: {ecn_qdepth: N, trim_qdepth: N, trim_dscp: N, ecn_host_ports: BOOL}


@dataclass(frozen=True)
class Thresholds:
    """Egress queue depths (packets ahead) from which switches mark ECN CE and trim RoCEv2 (0: off),
    the DSCP of a trimmed packet, and whether the last hop (a leaf's host-facing port) marks CE too
    (docs/pipeline.md, Congestion signals)."""

    ecn_qdepth: int = 0
    trim_qdepth: int = 0
    trim_dscp: int = TRIM_DSCP
    # On by default: the endpoint's window still cuts on every CE echo, and with trimming off an incast at
    # the last hop would have no signal but loss. Off is MRC's setting (CE only from the fabric's links).
    ecn_host_ports: bool = True

    @property
    def on(self) -> bool:
        return bool(self.ecn_qdepth or self.trim_qdepth)

    def describe(self) -> str:
        """'ECN CE at queue depth >= 20 (not on host-facing ports), trimming at >= 48 (DSCP 46)', or 'off'."""
        where = "" if self.ecn_host_ports else " (not on host-facing ports)"
        parts = ([f"ECN CE at queue depth >= {self.ecn_qdepth}{where}"] if self.ecn_qdepth else []) + (
            [f"trimming at >= {self.trim_qdepth} (DSCP {self.trim_dscp})"] if self.trim_qdepth else [])
        return ", ".join(parts) or "off"


def problems(t: Thresholds, where: str) -> list[str]:
    """What is wrong with a set of thresholds, one line each, prefixed by `where`."""
    out = []
    for name in FIELDS:
        value = getattr(t, name)
        top = 63 if name == "trim_dscp" else MAX_QDEPTH
        problem = limits.int_problem(value, 0, top)
        if problem:
            out.append(f"{where}{name}: {problem}")
    if not isinstance(t.ecn_host_ports, bool):
        out.append(f"{where}{HOST_PORTS}: expected true or false, got {limits.type_name(t.ecn_host_ports)}")
    if out:
        return out
    if t.trim_qdepth and t.trim_dscp == 0:
        out.append(f"{where}trim_dscp: 0 is the class every unmarked packet has; a trimmed packet needs its own (1-63)")
    if t.ecn_qdepth and t.trim_qdepth and t.trim_qdepth <= t.ecn_qdepth:
        out.append(f"{where}trim_qdepth ({t.trim_qdepth}) must be above ecn_qdepth ({t.ecn_qdepth}): "
                   "packets are CE-marked first and trimmed only when the queue grows further")
    return out


def parse(value: Any) -> tuple[Thresholds, list[str]]:
    """The topology's `congestion:` mapping (absent: off) and its problems."""
    if value is None:
        return Thresholds(), []
    if not isinstance(value, dict):
        return Thresholds(), [f"{KEY}: expected a mapping of {', '.join(KEYS)}, got {limits.type_name(value)}"]
    unknown = [str(k)[:40] for k in value if k not in KEYS]
    if unknown:
        return Thresholds(), [f"{KEY}: unknown key {unknown[0]!r} (known: {', '.join(KEYS)})"]
    t = Thresholds(**value)
    found = problems(t, f"{KEY}: ")
    return (Thresholds() if found else t), found


def to_dict(t: Thresholds) -> dict[str, int | bool]:
    return dataclasses.asdict(t)


def override(base: Thresholds, given: dict[str, int | bool | None]) -> Thresholds:
    """`base` with each field given (not None) replaced; click.UsageError (exit 2) if the result is bad."""
    changes: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    t = dataclasses.replace(base, **changes)
    found = problems(t, "--")
    if found:
        raise click.UsageError(found[0].replace("--ecn_qdepth", "--ecn-qdepth").replace("--trim_qdepth", "--trim-qdepth")
                               .replace("--trim_dscp", "--trim-dscp").replace(f"--{HOST_PORTS}", "--ecn-host-ports"))
    return t


# --- the global options ----------------------------------------------------------------------

OPTION_HELP = {
    "ecn-qdepth": ("FABRIC_ECN_QDEPTH", MAX_QDEPTH,
                   "Mark ECN CE from this egress queue depth (packets; 0 turns marking off; over the topology's "
                   "congestion: settings; env FABRIC_ECN_QDEPTH)."),
    "trim-qdepth": ("FABRIC_TRIM_QDEPTH", MAX_QDEPTH,
                    "Trim RoCEv2 to its headers from this queue depth, above --ecn-qdepth (0: off; env "
                    "FABRIC_TRIM_QDEPTH)."),
    "trim-dscp": ("FABRIC_TRIM_DSCP", 63, f"DSCP of a trimmed packet, 1-63 (default {TRIM_DSCP}; env FABRIC_TRIM_DSCP)."),
}


def _keep(ctx: click.Context, param: click.Parameter, value: int | bool | None) -> int | bool | None:
    ctx.meta.setdefault(KEY, {})[param.name] = value
    return value


HOST_PORTS_HELP = ("Mark ECN CE on the leaves' host-facing ports too (the default); --no-ecn-host-ports: trimming "
                   "only there, CE only from fabric links, as MRC (env FABRIC_ECN_HOST_PORTS).")


def global_options(f: Any) -> Any:
    """The --ecn-qdepth, --trim-qdepth, --trim-dscp and --ecn-host-ports options of fabricctl's group (read with
    given())."""
    f = click.option("--ecn-host-ports/--no-ecn-host-ports", HOST_PORTS, default=None, envvar="FABRIC_ECN_HOST_PORTS",
                     expose_value=False, callback=_keep, help=HOST_PORTS_HELP)(f)
    for name, (env, top, text) in reversed(OPTION_HELP.items()):
        f = click.option(f"--{name}", name.replace("-", "_"), type=click.IntRange(0, top), envvar=env, metavar="N",
                         expose_value=False, callback=_keep, help=text)(f)
    return f


def given(ctx: click.Context) -> dict[str, int | bool | None]:
    """The thresholds given on the command line, in the environment or the config file (None: not given)."""
    return {name: ctx.meta.get(KEY, {}).get(name) for name in KEYS}
