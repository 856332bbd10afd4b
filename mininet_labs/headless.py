"""A lab run by a process of its own (`fabricctl lab up` returns while the lab keeps running)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from controller.model.topology import Topology, load, to_dict
from mininet_labs.cleanup import cleanup
from mininet_labs.lab import Lab
from mininet_labs.labstate import CONFIG_NAME, DEFAULT_DIR, ENV_MARK, LabError, LabState, STATE_NAME, TOPOLOGY_NAME, write_lab_file
from mininet_labs.backends import nodes_for, nodes_of
from mininet_labs.nodes import Nodes
from mininet_labs.processes import tail, with_repo_path


def serve(lab_dir: Path) -> int:
    """Run the lab configured in lab_dir until SIGTERM/SIGINT (what `fabricctl lab up` starts)."""
    config = json.loads((lab_dir / CONFIG_NAME).read_text())
    nodes = nodes_for(config.get("dataplane", "bmv2"), **config.get("nodes", {}))
    lab = Lab(load(lab_dir / TOPOLOGY_NAME), lab_dir, nodes, program=config["program"], tag=config["tag"],
              election_id=config["election_id"], timeout=config["timeout"])
    if config.get("store"):  # fabricctl --store etcd://...: the record the plan is installed from lives there
        from controller.state.backends import open_store

        lab.store = open_store(config["store"], None, lab.model.name, timeout=config["timeout"])
    stop = {"now": False}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["now"] = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        lab.up(install=config["install"])
    except KeyboardInterrupt:
        return 1
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        lab.state.write(lab.state_path)  # phase failed, with the error, for 'lab up' to report
        return 1
    try:
        while not stop["now"]:
            signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        lab.down()
    return 0


def start(model: Topology, lab_dir: str | Path, nodes: Nodes, *, program: str = "srv6_spray", tag: str = "",
          election_id: int = 1, timeout: float = 10.0, install: bool = True, store: str | None = None) -> Lab:
    """A lab up on `nodes` that outlives this process: in a holder process of its own where the backend needs one
    (bmv2: Mininet's object), else made here. The Lab (attached), or LabError. `store`: fabricctl's --store URL,
    where the record whose plan is installed lives (None: the lab's state file)."""
    if nodes.holder:
        return start_headless(model, lab_dir, nodes, program=program, tag=tag, election_id=election_id,
                              timeout=timeout, install=install, store=store)
    lab = Lab(model, lab_dir, nodes, program=program, tag=tag, election_id=election_id, timeout=timeout)
    if store:
        from controller.state.backends import open_store

        lab.store = open_store(store, None, lab.model.name, timeout=timeout)
    return lab.up(install=install)


def start_headless(model: Topology, lab_dir: str | Path = DEFAULT_DIR, nodes: Nodes | None = None, *,
                   program: str = "srv6_spray", tag: str = "", pcap: bool = False, log_level: str = "warn",
                   election_id: int = 1, timeout: float = 10.0, install: bool = True, wait: float = 300.0,
                   tls: bool = False, store: str | None = None) -> Lab:
    """Start a lab in a background process (it outlives this one) and wait until it is ready; the attached
    Lab, or LabError with the background process's error. `nodes` default: bmv2 with pcap, log_level, tls."""
    lab_dir = Path(lab_dir).resolve()
    nodes = nodes if nodes is not None else nodes_for("bmv2", pcap=pcap, log_level=log_level, tls=tls)
    why = nodes.why_not() or nodes.size_problem(model)
    if why:
        raise LabError(why)
    state_path = lab_dir / STATE_NAME
    if state_path.exists():
        old = LabState.read(state_path)
        if nodes_of(old).running(old):
            raise LabError(f"a lab already runs in {lab_dir}; 'fabricctl lab down --dir {lab_dir}'")
        cleanup(lab_dir)
    lab_dir.mkdir(parents=True, exist_ok=True)
    write_lab_file(lab_dir, TOPOLOGY_NAME, yaml.safe_dump(to_dict(model), sort_keys=False))
    write_lab_file(lab_dir, CONFIG_NAME, json.dumps({
        "dataplane": nodes.dataplane, "nodes": nodes.options(), "program": program, "tag": tag,
        "election_id": election_id, "timeout": timeout, "install": install, "store": store}) + "\n")
    env = with_repo_path({**os.environ, ENV_MARK: str(lab_dir)})
    with open(lab_dir / "lab.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mininet_labs.headless", "serve", str(lab_dir)], env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    end = time.monotonic() + wait
    while True:
        state = LabState.read(state_path) if state_path.exists() else None
        if state is not None and state.pid == proc.pid and state.phase == "ready":
            return Lab.attach(lab_dir)
        if proc.poll() is not None:
            error = state.error if state is not None and state.pid == proc.pid and state.error else tail(lab_dir / "lab.log")
            cleanup(lab_dir)
            raise LabError(f"lab up failed: {error}")
        if time.monotonic() > end:
            cleanup(lab_dir)
            raise LabError(f"lab not ready after {wait:.0f}s (log: {lab_dir / 'lab.log'})")
        time.sleep(0.1)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "serve":
        sys.exit(serve(Path(sys.argv[2])))
    print("usage: python3 -m mininet_labs.headless serve LAB_DIR  (use 'fabricctl lab up')", file=sys.stderr)
    sys.exit(2)
