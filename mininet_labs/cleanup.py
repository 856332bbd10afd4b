"""Tearing a lab down: the processes and interfaces it marked as its own, and nothing else."""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path


from controller.model.topology import Topology, load
from mininet_labs.faults import clear_remains as clear_fault_remains
from mininet_labs.labstate import (CONFIG_NAME, DATAPLANES, DEFAULT_DIR, ENV_MARK, LabError, LabState, STATE_NAME,
                                  TOPOLOGY_NAME)
from mininet_labs.processes import alive, environ


@dataclass
class CleanupReport:
    """What cleanup did, and anything of the lab's it found still there afterwards."""

    killed: list[int] = field(default_factory=list)
    deleted_intfs: list[str] = field(default_factory=list)
    leftover_pids: list[int] = field(default_factory=list)
    leftover_intfs: list[str] = field(default_factory=list)
    what: str = "interfaces"  # what the node backend removes: bmv2 switch ports, or the kernel lab's namespaces

    @property
    def clean(self) -> bool:
        return not self.leftover_pids and not self.leftover_intfs


def marked_pids(lab_dir: str | Path) -> list[int]:
    """PIDs of every process whose environment carries SRV6_FABRIC_LAB=<lab_dir> (ours, not this one)."""
    mark = f"{ENV_MARK}={Path(lab_dir).resolve()}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if mark in env.split(b"\0") and alive(int(entry.name)):
            out.append(int(entry.name))
    return sorted(out)


def cleanup(lab_dir: str | Path = DEFAULT_DIR, model: Topology | None = None, tag: str | None = None, *,
            signal_owner: bool = True, wait: float = 20.0) -> CleanupReport:
    """Remove every process, interface and namespace a lab in lab_dir made, also after a crash, whichever its
    data plane (its state names it; without a state, the lab's config).

    With the state file: ask the process holding the lab to stop (SIGTERM) and wait for it. Then every process
    marked with SRV6_FABRIC_LAB=<lab_dir> (host shells, so their namespaces and veths go too; switches; commands
    in hosts), then what the node backend made: bmv2's root-namespace switch ports (from the state, or the lab's
    topology.yaml with the tag), the kernel's namespaces (from the state). Nothing else is touched. Logs stay."""
    from mininet_labs.bmv2proc import stop_process  # not mininet_labs.switch: cleaning up needs no Mininet
    from mininet_labs.backends import nodes_for, nodes_of

    lab_dir = Path(lab_dir).resolve()
    report = CleanupReport()
    clear_fault_remains(lab_dir)  # thaw frozen switches (SIGTERM waits on a stopped process), drop nft tables
    state_path = lab_dir / STATE_NAME
    state = LabState.read(state_path) if state_path.exists() else None
    # the holder process carries this lab's mark; the pid of a kernel lab's (long gone) `lab up` may be anyone's now
    if state is not None and signal_owner and state.pid != os.getpid() and alive(state.pid) \
            and f"{ENV_MARK}={lab_dir}".encode() in environ(state.pid).split(b"\0"):
        os.kill(state.pid, signal.SIGTERM)
        end = time.monotonic() + wait
        while alive(state.pid) and time.monotonic() < end:
            time.sleep(0.1)
        if alive(state.pid):
            os.kill(state.pid, signal.SIGKILL)
        report.killed.append(state.pid)
    for pid in marked_pids(lab_dir):
        stop_process(pid, grace=2.0)
        report.killed.append(pid)
    if state is None and model is None and (lab_dir / TOPOLOGY_NAME).exists():
        try:
            model = load(lab_dir / TOPOLOGY_NAME)
        except (OSError, ValueError) as e:  # not a topology of ours: its interfaces are not known
            raise LabError(f"cannot read the lab's topology {lab_dir / TOPOLOGY_NAME}: {e}") from None
    nodes = nodes_of(state) if state is not None else nodes_for(_configured_dataplane(lab_dir))
    report.deleted_intfs, report.leftover_intfs = nodes.remove(lab_dir, state, model, tag or "")
    report.what = nodes.removes
    report.leftover_pids = marked_pids(lab_dir)
    if report.clean:
        state_path.unlink(missing_ok=True)
    return report


def _configured_dataplane(lab_dir: Path) -> str:
    """The data plane lab-config.json names (bmv2 when it names none or cannot be read)."""
    try:
        doc = json.loads((lab_dir / CONFIG_NAME).read_text())
    except (OSError, ValueError):
        return "bmv2"
    return str(doc["dataplane"]) if isinstance(doc, dict) and doc.get("dataplane") in DATAPLANES else "bmv2"
