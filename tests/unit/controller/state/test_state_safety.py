"""The failure state cannot be lost or clobbered: parallel fail/restore, files that are not ours,
symlinks, special files, modes, interrupted writes, and restore all on a stale state file."""

from __future__ import annotations

from tests.paths import REPO

from tests.paths import UNIT_DATA

import json
import os
import shutil
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from controller.files import safefile
from fabricctl.main import cli
from controller.state.statefile import load_state, save_state
from controller.model.failures import LinkDown
from controller.model.topology import build, to_dict
from tests.unit.usage import says

LAB = UNIT_DATA / "two_plane_lab.yaml"


def run(*args: str) -> Result:
    return CliRunner(env={"FABRIC_TOPOLOGY": None, "FABRIC_STATE": None, "FABRIC_CONFIG": None}).invoke(
        cli, list(args), prog_name="fabricctl")


def fabricctl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABRIC_")}
    return subprocess.run([sys.executable, "-m", "fabricctl", *args], capture_output=True, text=True,
                          cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, timeout=timeout)


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    path = tmp_path / "lab.yaml"
    shutil.copy(LAB, path)
    return path


def snapshot(path: Path) -> tuple[bytes, int]:
    st = os.lstat(path)
    return path.read_bytes(), st.st_mode


# --- the lost update ---------------------------------------------------------------------------

def test_parallel_fails_are_all_recorded(tmp_path: Path) -> None:
    """16 parallel `fail link --no-apply` of 16 different links, over 2 rounds: every one recorded."""
    topo = build(1, 4, 4, 1)
    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump(to_dict(topo), sort_keys=False))
    links = [(leaf.name, spine.name) for leaf in topo.t0s(0) for spine in topo.t1s(0)]
    assert len(links) == 16
    state = tmp_path / ".fabric-state.json"
    for _ in range(2):
        state.unlink(missing_ok=True)
        with ThreadPoolExecutor(len(links)) as pool:
            results = list(pool.map(lambda ab: fabricctl("--topology", str(path), "fail", "link", *ab, "--no-apply"),
                                    links))
        assert [r.returncode for r in results] == [0] * 16, [r.stderr for r in results if r.returncode]
        assert load_state(state) == frozenset(LinkDown(a, b) for a, b in links)
        with ThreadPoolExecutor(len(links)) as pool:
            results = list(pool.map(lambda ab: fabricctl("--topology", str(path), "restore", "link", *ab,
                                                         "--no-apply"), links[:8]))
        assert [r.returncode for r in results] == [0] * 8
        assert load_state(state) == frozenset(LinkDown(a, b) for a, b in links[8:])


# --- files that are not ours -------------------------------------------------------------------

def test_state_pointing_at_a_plan_export_is_refused(lab: Path, tmp_path: Path) -> None:
    export = tmp_path / "plan.json"
    assert run("--topology", str(lab), "plan", "--export", str(export)).exit_code == 0
    before = snapshot(export)
    result = run("--topology", str(lab), "--state", str(export), "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply")
    assert result.exit_code == 2
    assert result.stderr == (f"error: state file {export}: not a fabricctl state file (expected {{\"format\": "
                             f"\"srv6-fabric-state/1\" or \"srv6-fabric-state/2\", \"failures\": [...]}}, found keys format, "
                             "switches)\n")
    assert snapshot(export) == before


@pytest.mark.parametrize("text", ['{"name": "my notes", "failures": []}', '[1, 2, 3]', '{"failures": 3}',
                                  '{"format": "other/1", "failures": []}', "plain text\n"])
def test_state_pointing_at_other_json_is_refused(lab: Path, tmp_path: Path, text: str) -> None:
    other = tmp_path / "other.json"
    other.write_text(text)
    before = snapshot(other)
    result = run("--topology", str(lab), "--state", str(other), "restore", "all")
    assert result.exit_code == 2 and result.stderr.startswith(f"error: state file {other}: ")
    assert result.stderr.count("\n") == 1
    assert snapshot(other) == before


def test_plan_export_never_overwrites_a_state_file(lab: Path, tmp_path: Path) -> None:
    run("--topology", str(lab), "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply")
    state = tmp_path / ".fabric-state.json"
    before = snapshot(state)
    result = run("--topology", str(lab), "plan", "--export", str(state))
    assert result.exit_code == 2
    assert result.stderr == (f"error: {state} exists and is not a plan export (no \"format\": \"srv6-fabric-plan/1\"): "
                             "refusing to overwrite it\n")
    assert snapshot(state) == before
    export = tmp_path / "plan.json"
    assert run("--topology", str(lab), "plan", "--export", str(export)).exit_code == 0
    assert run("--topology", str(lab), "plan", "--healthy", "--export", str(export)).exit_code == 0  # ours: replaced


def test_a_marker_less_state_file_of_the_old_shape_is_still_read(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    state.write_text('{"failures": [{"link": ["p0-t0-0", "p0-t1-1"]}]}')
    assert run("--topology", str(lab), "fail", "switch", "p1-t1-0", "--no-apply").exit_code == 0
    doc = json.loads(state.read_text())
    assert doc == {"format": "srv6-fabric-state/1", "failures": [{"link": ["p0-t0-0", "p0-t1-1"]},
                                                                  {"switch": "p1-t1-0"}]}


def test_a_symlinked_state_file_is_written_through(lab: Path, tmp_path: Path) -> None:
    real = tmp_path / "real" / "state.json"
    real.parent.mkdir()
    save_state(real, [])
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert run("--topology", str(lab), "--state", str(link), "fail", "switch", "p1-t1-0", "--no-apply").exit_code == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["failures"] == [{"switch": "p1-t1-0"}]
    assert sorted(p.name for p in real.parent.iterdir()) == [".state.json.lock", "state.json"]


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_special_files_are_refused_before_anything_is_read(lab: Path, tmp_path: Path, kind: str) -> None:
    path = {"fifo": tmp_path / "fifo", "directory": tmp_path / "dir", "device": Path("/dev/zero")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    what = {"fifo": "a FIFO", "directory": "a directory", "device": "a device"}[kind]
    for args in (("fail", "switch", "p1-t1-0", "--no-apply"), ("plan",)):
        result = fabricctl("--topology", str(lab), "--state", str(path), *args, timeout=30)  # a FIFO read would hang
        assert result.returncode == 2
        if result.stderr != f"error: state file {path} is {what}, not a regular file\n":  # ours, or click.Path's
            assert kind == "directory", result.stderr
            says(result.stderr, "--state", str(path), "(see 'fabricctl --help')")
    if kind != "device":
        result = fabricctl("--topology", str(lab), "plan", "--export", str(path), timeout=30)
        assert result.returncode == 2 and result.stderr.count("\n") == 1
        if kind == "fifo":
            assert result.stderr.startswith(f"error: plan export {path} is {what}, not a regular file")
        else:  # click.Path refuses the directory
            says(result.stderr, "--export", str(path))
    assert stat.S_ISFIFO(os.stat(path).st_mode) if kind == "fifo" else True


def test_an_existing_state_file_keeps_its_mode(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    save_state(state, [])
    state.chmod(0o640)
    assert run("--topology", str(lab), "fail", "switch", "p1-t1-0", "--no-apply").exit_code == 0
    assert stat.S_IMODE(state.stat().st_mode) == 0o640
    state.chmod(0o604)
    assert run("--topology", str(lab), "restore", "all", "--no-apply").exit_code == 0
    assert stat.S_IMODE(state.stat().st_mode) == 0o604


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state.json"
    save_state(state, [LinkDown("a", "b")])
    before = state.read_bytes()

    def interrupted(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(safefile.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_state(state, [])
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
    assert state.read_bytes() == before


def test_a_temporary_file_a_killed_writer_left_is_removed_by_the_next_write(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = tmp_path / f".state.json.{dead}.abc123.tmp"
    stale.write_text('{"partial')
    live = tmp_path / f".state.json.{os.getpid()}.def456.tmp"  # a writer still running: left alone
    live.write_text("")
    save_state(state, [])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["state.json", live.name])


# --- restore all on a stale state file ---------------------------------------------------------

def test_restore_all_clears_failures_naming_switches_no_longer_in_the_topology(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    state.write_text(json.dumps({"format": "srv6-fabric-state/1", "failures": [
        {"link": ["p0-t0-0", "p0-t1-1"]}, {"switch": "p7-t1-0"}, {"host_port": ["gone-leaf", 3]}]}))
    assert run("--topology", str(lab), "plan").exit_code == 2  # the stale file is refused elsewhere
    result = run("--topology", str(lab), "restore", "all", "--no-apply")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[:3] == [
        f"dropped: host port gone-leaf port 3 (not in the topology {lab})",
        f"dropped: switch p7-t1-0 (not in the topology {lab})",
        f"recorded: restore all failures; 0 failures in {state}",
    ]
    assert load_state(state) == frozenset()
    result = run("--topology", str(lab), "--state", str(state), "restore", "all", "--json", "--no-apply")
    assert json.loads(result.stdout)["changed"] is False


def test_restore_all_json_names_what_was_dropped(lab: Path, tmp_path: Path) -> None:
    state = tmp_path / ".fabric-state.json"
    state.write_text('{"failures": [{"switch": "p7-t1-0"}]}')
    result = run("--topology", str(lab), "restore", "all", "--no-apply", "--json")
    doc = json.loads(result.stdout)
    assert (result.exit_code, doc["dropped"], doc["failures"]) == (0, [{"switch": "p7-t1-0"}], [])


# --- the lab's files --------------------------------------------------------------------------

def test_a_lab_never_overwrites_files_in_a_directory_that_is_not_a_labs(tmp_path: Path) -> None:
    from mininet_labs.lab import LabError, LabState, write_lab_file

    mine = tmp_path / "topology.yaml"
    mine.write_text("my own notes\n")
    with pytest.raises(LabError, match=rf"^{mine} exists and {tmp_path} is not a lab directory \(no lab-state.json\): "
                                       "refusing to overwrite it; choose another --dir$"):
        write_lab_file(tmp_path, "topology.yaml", "name: lab\n")
    assert mine.read_text() == "my own notes\n"
    foreign = tmp_path / "lab-state.json"
    foreign.write_text('{"format": "someone-else/2"}')
    with pytest.raises(LabError, match="is not a lab state"):
        LabState(str(tmp_path), "t.yaml", "srv6_spray", "", os.getpid()).write(foreign)
    assert foreign.read_text() == '{"format": "someone-else/2"}'
    foreign.unlink()
    LabState(str(tmp_path), "t.yaml", "srv6_spray", "", os.getpid()).write(foreign)  # now a lab's directory
    write_lab_file(tmp_path, "topology.yaml", "name: lab\n")
    assert mine.read_text() == "name: lab\n"
