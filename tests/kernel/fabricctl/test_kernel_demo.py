"""`fabricctl lab demo` on the kernel data plane: green when the controller heals the cut, red when it is not told."""

from __future__ import annotations

from tests.paths import REPO

import json
import subprocess
import sys
from pathlib import Path

from mininet_labs.kernel import netns


def demo(lab_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricctl", "lab", "demo", "--dataplane", "kernel", "--dir",
                           str(lab_dir), *args], capture_output=True, text=True, timeout=300, cwd=REPO)


def test_the_demo_passes_with_its_loss_window_under_the_bound_it_states(kernel_ready: None, tmp_path: Path) -> None:
    from mininet_labs.demo import LOSS_WINDOW_BOUND_MS

    r = demo(tmp_path / "demo")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"(bound {LOSS_WINDOW_BOUND_MS:.0f} ms" in r.stdout  # and past a reconcile that came later than that
    assert "controller reconciled p0-t1-1, p0-t0-0, p0-t0-1" in r.stdout
    assert netns.existing(f"{netns.PREFIX}dm-") == []


def test_the_demo_fails_when_the_controller_is_not_told_of_the_cut(kernel_ready: None, tmp_path: Path) -> None:
    r = demo(tmp_path / "demo", "--no-failover", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    checks = {c["check"]: c for c in doc["checks"]}
    assert doc["ok"] is False
    assert (checks["cut + fail link"]["ok"], checks["cut + fail link"]["touched"]) == (False, [])
    assert checks["QPs through the cut"]["ok"]  # the cut hit traffic ...
    assert not checks["no loss after the reconcile"]["ok"]  # ... and nothing healed it until the mend
    assert not checks["plane 0 loss window"]["ok"]
    assert checks["plane 1 QPs"]["ok"] and checks["lab down"]["ok"]  # the rest held: only the failover failed
    assert netns.existing(f"{netns.PREFIX}dm-") == []
