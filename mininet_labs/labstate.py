"""The lab's directory and files: its constants, the lab-state file, the default topology and what a lab needs."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


from controller.model import limits
from controller.files.safefile import UnsafeFile, read_text, write_atomic
from controller.model.failures import parse_json
from controller.programs.toolchain import find_binary
from controller.model.topology import Topology, build
from mininet_labs._mininet import missing as mininet_missing


DEFAULT_DIR = Path("/tmp/srv6-fabric-lab")


STATE_NAME = "lab-state.json"


TOPOLOGY_NAME = "topology.yaml"


CONFIG_NAME = "lab-config.json"


ENV_MARK = "SRV6_FABRIC_LAB"


FORMAT = "srv6-fabric-lab/1"


CUT_MTU = 68  # a cut port's MTU: below every fabric frame


DATAPLANES = ("bmv2", "kernel")


NETNS_PREFIX = "sf-"  # every namespace a kernel lab makes (mininet_labs.kernel.netns)


class LabError(RuntimeError):
    """The lab could not be brought up, reached or taken down; one line (plus detail lines)."""


def default_topology(planes: int = 2, t1: int = 2, t0: int = 2, hosts: int = 2, *, grpc_base_port: int = 50001,
                     name: str = "lab") -> Topology:
    """A regular fabric with switches on 127.0.0.1:grpc_base_port.. (default 2 x 2 x 2 x 2)."""
    return build(planes, t1, t0, hosts, name=name, grpc_base_port=grpc_base_port)


MAX_LAB_SWITCHES = 128  # bmv2 processes one machine runs as a lab (each ~50 MB and a thread per port)


def size_problem(model: Topology) -> str | None:
    """Why a topology is too large to run as a lab on one machine, or None."""
    n = len(model.switches)
    if n > MAX_LAB_SWITCHES:
        return f"a lab of {n} switches: at most {MAX_LAB_SWITCHES} bmv2 switches run on one machine"
    return None


def prerequisites() -> str | None:
    """None when a lab can run here, else what is missing (root, Mininet, simple_switch_grpc)."""
    if os.geteuid() != 0:
        return "a lab needs root (network namespaces, veths)"
    why = mininet_missing()
    if why:
        return why
    if find_binary("simple_switch_grpc") is None:
        return "simple_switch_grpc not found (PATH, $SIMPLE_SWITCH_GRPC or $P4_TOOLCHAIN_BIN)"
    return None


@dataclass
class LabState:
    """What a lab made, as written to lab-state.json, whichever its data plane."""

    lab_dir: str
    topology: str
    program: str
    tag: str
    pid: int  # the process that ran `up` (bmv2: it holds the Mininet object while the lab runs)
    phase: str = "starting"  # starting | ready | failed | stopping
    error: str | None = None
    switches: dict[str, dict[str, Any]] = field(default_factory=dict)  # bmv2: pid, device_id, grpc, log; kernel: netns
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> pid (bmv2) or netns (kernel), nics
    intfs: list[str] = field(default_factory=list)  # root-namespace interfaces (bmv2 switch ports)
    timings: dict[str, float] = field(default_factory=dict)
    dataplane: str = "bmv2"  # bmv2 | kernel: which node backend made it (mininet_labs.nodes)
    namespaces: dict[str, str] = field(default_factory=dict)  # kernel: switch or host -> its named namespace
    format: str = FORMAT

    def write(self, path: Path) -> None:
        """Write the state whole (controller.files.safefile); never over a file that is not a lab state."""
        try:
            write_atomic(path, json.dumps(asdict(self), indent=1) + "\n", what="lab state", ours=LabState.read)
        except OSError as e:
            raise LabError(f"cannot write lab state {path}: {e.strerror or e}") from None

    @classmethod
    def read(cls, path: Path) -> LabState:
        """The state in `path`; LabError (one line) for a file that is not a lab state of ours."""
        try:
            doc = parse_json(read_text(path, limits.MAX_LAB_STATE_BYTES, "lab state"))
        except UnsafeFile as e:
            raise LabError(str(e)) from None
        except RecursionError:
            raise LabError(f"cannot read lab state {path}: nested too deeply") from None
        except (OSError, ValueError) as e:
            raise LabError(f"cannot read lab state {path}: {getattr(e, 'strerror', None) or e}") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise LabError(f"{path} is not a lab state (no \"format\": \"{FORMAT}\")")
        try:
            state = cls(**doc)
        except TypeError as e:
            raise LabError(f"lab state {path} is malformed: {e}") from None
        problem = state.problem()
        if problem:
            raise LabError(f"lab state {path} is malformed: {problem}")
        return state

    def problem(self) -> str | None:
        """What in a state read from a file has the wrong type (None if all is well)."""
        for key, kind in (("lab_dir", str), ("topology", str), ("program", str), ("tag", str), ("phase", str),
                          ("switches", dict), ("hosts", dict), ("intfs", list), ("timings", dict), ("dataplane", str),
                          ("namespaces", dict)):
            if not isinstance(getattr(self, key), kind):
                return f"{key} is {limits.type_name(getattr(self, key))}, expected {kind.__name__}"
        if not isinstance(self.pid, int) or isinstance(self.pid, bool) or self.pid < 1:
            return f"pid {self.pid!r} is not a process id"
        if not all(isinstance(i, str) for i in self.intfs):
            return "intfs holds a non-string"
        for name, h in self.hosts.items():
            if not isinstance(h, dict) or not isinstance(h.get("pid"), int) or not isinstance(h.get("nics", []), list):
                return f"host {name!r} is not {{pid, nics}}"
        for name, sw in self.switches.items():
            if not isinstance(sw, dict):
                return f"switch {name!r} is not a mapping"
        if self.dataplane not in DATAPLANES:
            return f"dataplane {self.dataplane!r} is not one of {', '.join(DATAPLANES)}"
        if not all(isinstance(v, str) and v.startswith(NETNS_PREFIX) for v in self.namespaces.values()):
            return f"namespaces must be {NETNS_PREFIX}* names"
        return None


def write_lab_file(lab_dir: Path, name: str, text: str) -> None:
    """Write one of the lab's own files in its directory: an existing one is replaced only in a
    lab's directory (one holding a lab state or lab config) or when it holds this text already,
    never in someone else's directory."""
    def ours(path: Path) -> None:
        mine = (lab_dir / STATE_NAME).exists() or (lab_dir / CONFIG_NAME).exists()
        if not mine and read_text(path, limits.MAX_TOPOLOGY_BYTES, f"lab {name}") != text:
            raise LabError(f"{path} exists and {lab_dir} is not a lab directory (no {STATE_NAME}): refusing to "
                           "overwrite it; choose another --dir")
    try:
        write_atomic(lab_dir / name, text, what=f"lab {name}", ours=ours)
    except OSError as e:
        raise LabError(str(e) if isinstance(e, UnsafeFile) else f"cannot write {lab_dir / name}: {e.strerror or e}") from None


def intf_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def natural(name: str) -> tuple[Any, ...]:
    """A sort key that puts p0-t0-2 before p0-t0-10."""
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
