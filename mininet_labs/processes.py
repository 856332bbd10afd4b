"""The processes a lab starts: marked as the lab's by their environment, found, waited for, their logs' tails."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


from mininet_labs.labstate import ENV_MARK, LabError


def mark(lab_dir: Path) -> str | None:
    saved = os.environ.get(ENV_MARK)
    os.environ[ENV_MARK] = str(lab_dir)
    return saved


def unmark(saved: str | None) -> None:
    if saved is None:
        os.environ.pop(ENV_MARK, None)
    else:
        os.environ[ENV_MARK] = saved


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def with_repo_path(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with this repository first on PYTHONPATH, for `python3 -m mininet_labs...` in child processes."""
    repo = str(Path(__file__).resolve().parents[1])
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [repo, env.get("PYTHONPATH")]))}


def tail(path: Path, chars: int = 600) -> str:
    try:
        return " | ".join(path.read_text(errors="replace")[-chars:].strip().splitlines()[-4:]) or "(no output)"
    except OSError:
        return "(no output)"


def stop_all(procs: Iterable[subprocess.Popen[Any]], grace: float = 10.0) -> None:
    """SIGTERM every process still running, all before waiting for any, so they stop together; then wait for
    each up to `grace` seconds and SIGKILL it if it is still there."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def wait_files(paths: Sequence[Path], procs: Mapping[str, subprocess.Popen[Any]], timeout: float) -> None:
    end = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise LabError(f"receiver on {name} exited ({proc.returncode}) before listening")
        if time.monotonic() > end:
            raise LabError(f"receivers not listening after {timeout:.0f}s")
        time.sleep(0.02)
