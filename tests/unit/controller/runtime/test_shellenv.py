"""controller.runtime.shellenv: which interpreter runs p4runtime-shell, and making its venv."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from controller.runtime import shellenv


def _fake_venv(venv: Path, marker: str | None) -> None:
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    if marker is not None:
        (venv / ".srv6-fabric-shell").write_text(marker + "\n")


def test_a_venv_is_used_only_once_made_for_this_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(shellenv.ENV_VARIABLE, raising=False)
    half, old, done = tmp_path / "half", tmp_path / "old", tmp_path / "done"
    _fake_venv(half, None)  # pip never finished
    _fake_venv(old, "p4runtime-shell==0.0.5")
    _fake_venv(done, shellenv.SHELL_PACKAGE)
    assert [shellenv.find(v) for v in (half, old)] == [None, None]
    assert shellenv.find(done) == shellenv.ShellPython(done / "bin" / "python", "venv")
    assert shellenv.planned(half) == shellenv.ShellPython(half / "bin" / "python", "venv")


def test_the_variable_wins_over_the_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_venv(tmp_path / "v", shellenv.SHELL_PACKAGE)
    monkeypatch.setenv(shellenv.ENV_VARIABLE, sys.executable)
    assert shellenv.find(tmp_path / "v") == shellenv.ShellPython(Path(sys.executable), shellenv.ENV_VARIABLE)
    monkeypatch.setenv(shellenv.ENV_VARIABLE, str(tmp_path))  # a directory
    with pytest.raises(shellenv.ShellEnvError, match=f"^FABRIC_SHELL_PYTHON={tmp_path}: not an executable file$"):
        shellenv.find()


def test_default_venv_under_the_cache_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert shellenv.default_venv() == tmp_path / "srv6-fabric" / "shell-venv"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert shellenv.default_venv() == tmp_path / "home" / ".cache" / "srv6-fabric" / "shell-venv"


def test_a_failed_install_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip cannot reach any index here, so the install fails: the venv it began is removed, one error says why."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    venv = tmp_path / "cache" / "shell-venv"
    said: list[str] = []
    with pytest.raises(shellenv.ShellEnvError) as error:
        shellenv.make(venv, say=said.append)
    assert str(error.value).startswith(f"making p4runtime-shell's environment at {venv} failed: pip install "
                                       f"{shellenv.SHELL_PACKAGE}: ")
    assert "No matching distribution" in str(error.value) and "\n" not in str(error.value)
    assert said == [f"p4runtime-shell is not in the controller's environment (it pins protobuf<3.21): making a "
                    f"virtual environment for it at {venv} (pip install {shellenv.SHELL_PACKAGE}) ..."]
    monkeypatch.delenv(shellenv.ENV_VARIABLE, raising=False)
    assert not venv.exists() and shellenv.find(venv) is None


def test_command_line() -> None:
    argv = shellenv.command(Path("/x/python"), "unix:/tmp/s.sock", 3, (2 << 64) | 7,
                            (Path("a.p4info.txtpb"), Path("a.json")), ["--ssl"])
    assert argv == ["/x/python", "-m", "p4runtime_sh", "--grpc-addr", "unix:/tmp/s.sock", "--device-id", "3",
                    "--election-id", "2,7", "--config", "a.p4info.txtpb,a.json", "--ssl"]
