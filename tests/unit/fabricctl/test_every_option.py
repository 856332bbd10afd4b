"""Property: every numeric and path option of every fabricctl command, fed a boundary value (0, -1, inf, nan,
huge, empty, a directory, a FIFO) or any number, ends in exactly one `error:` line on stderr and a non-zero exit
when the option refuses it, and never in a traceback or a hang when it takes it.

The options are found by walking the click tree from fabricctl.main: a command added later is covered.

Which runs go on past validation (the rule): a value the option's type takes runs the command only where
nothing it could then do can touch the host. It runs in an empty directory with the topology, state file and
store absent (FABRIC_TOPOLOGY, FABRIC_STATE point there, FABRIC_STORE unset), so a command that needs them
stops with one line; the first attempt to start a process or to bind, connect or send on a socket (the sandbox
below) ends the run there, counted as past validation and not judged further. The `lab` and `install` groups
act on the host as root (network namespaces, interfaces, files under /usr/local) by ways the sandbox does not
see (netlink, ctypes): with a value their types take they are not run, only the refusals are.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricctl.main import cli

UNSAFE_GROUPS = {"lab", "install"}  # act on the host by ways the sandbox does not see: refusals only
HANG_AFTER = 20  # seconds one run may take before it counts as a hang (a failure, never a stuck suite)


@dataclass(frozen=True)
class Opt:
    command: tuple[str, ...]  # the words after fabricctl ('' options: the root's)
    flag: str
    param: click.Parameter

    def __str__(self) -> str:
        return " ".join(("fabricctl", *self.command, self.flag))


def _is_checked(p: click.Parameter) -> bool:
    return isinstance(p, click.Option) and not p.is_flag and not p.count and not p.hidden and bool(p.opts) and isinstance(
        p.type, (click.types.IntParamType, click.types.FloatParamType, click.Path, click.File)) or (
        isinstance(p, click.Option) and type(p.type).__name__ in ("Seconds", "ElectionId"))


def _walk(cmd: click.Command, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _walk(sub, (*path, name))


def options() -> list[Opt]:
    out = []
    for path, cmd in _walk(cli, ()):
        for p in cmd.params:
            if _is_checked(p):
                out.append(Opt(path, max(p.opts, key=len), p))
    return out


OPTIONS = options()


def _refused(opt: Opt, value: str) -> bool:
    """Whether the option's own type refuses the value (as click will, before the command runs)."""
    ctx = click.Context(cli)
    try:
        opt.param.type_cast_value(ctx, value)
    except click.BadParameter:
        return True
    return False


class Touched(BaseException):
    """The command went past validation to the host (a process, a socket): where this test stops it."""


class Hang(BaseException):
    pass


@contextmanager
def sandbox() -> Iterator[None]:
    def touch(*args: object, **kwargs: object) -> None:
        raise Touched(str(args[:2])[:80])

    saved = [(subprocess.Popen, "_execute_child"), (socket.socket, "connect"), (socket.socket, "connect_ex"),
             (socket.socket, "bind"), (socket.socket, "sendto"), (os, "system"), (os, "execvp"), (os, "execv"),
             (os, "execvpe"), (os, "fork")]
    originals = [getattr(owner, name) for owner, name in saved]

    def alarm(signum: int, frame: object) -> None:
        raise Hang()

    old = signal.signal(signal.SIGALRM, alarm)
    for owner, name in saved:
        setattr(owner, name, touch)
    try:
        yield
    finally:
        for (owner, name), original in zip(saved, originals):
            setattr(owner, name, original)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Outcome:
    refused: bool
    exit_code: int | None = None
    stderr: str = ""
    exception: BaseException | None = None


def invoke(opt: Opt, value: str, where: Path) -> Outcome | None:
    """The run of `fabricctl [command] OPTION VALUE` (None: the rule above does not run it), in an empty working
    directory of its own: a relative VALUE ("0") means the same to the type check as to the run, and nothing an
    earlier run left (a lab directory named "0") makes a path option take a value it would refuse."""
    env = {"FABRIC_TOPOLOGY": str(where / "absent" / "topology.yaml"), "FABRIC_STATE": str(where / "absent" / "s"),
           "FABRIC_STORE": None, "FABRIC_CONFIG": None, "FABRIC_PROGRAM": None}
    old = os.getcwd()
    os.chdir(tempfile.mkdtemp(dir=where))
    try:
        refused = _refused(opt, value)
        if not refused and opt.command and opt.command[0] in UNSAFE_GROUPS:
            return None
        with sandbox():
            signal.setitimer(signal.ITIMER_REAL, HANG_AFTER)
            try:
                r = CliRunner().invoke(cli, [*opt.command, opt.flag, value], env=env, prog_name="fabricctl")
            except Touched:
                return Outcome(refused, None, "", Touched())
            except Hang:
                return Outcome(refused, None, "", Hang())
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        os.chdir(old)
    exc = r.exception if r.exception is not None and not isinstance(r.exception, SystemExit) else None
    return Outcome(refused, r.exit_code, r.stderr, exc)


def judge(opt: Opt, value: str, out: Outcome | None) -> str | None:
    """What is wrong with a run (None: nothing)."""
    if out is None or isinstance(out.exception, Touched):
        return None
    what = f"{opt} {value!r}"
    if isinstance(out.exception, Hang):
        return f"{what}: no end within {HANG_AFTER} s"
    if out.exception is not None:
        return f"{what}: {type(out.exception).__name__}: {out.exception} (a traceback)"
    if "Traceback" in out.stderr:
        return f"{what}: a traceback on stderr"
    if out.refused:
        lines = out.stderr.splitlines()
        if out.exit_code == 0 or len(lines) != 1 or not lines[0].startswith("error:"):
            return f"{what}: refused with exit {out.exit_code} and stderr {out.stderr!r}"
        if opt.flag not in lines[0]:
            return f"{what}: the error does not name {opt.flag}: {lines[0]!r}"
    elif out.exit_code not in (0, None) and not out.stderr.strip():
        return f"{what}: exit {out.exit_code} without a word"
    return None


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("boundary")
    (d / "a-directory").mkdir()
    os.mkfifo(d / "a-fifo")
    return {"0": "0", "-1": "-1", "inf": "inf", "nan": "nan", "huge": "1" + "0" * 30, "empty": "",
            "a directory": str(d / "a-directory"), "a FIFO": str(d / "a-fifo")}


def test_the_walk_finds_the_options_this_issue_is_about():
    found = {str(o) for o in OPTIONS}
    for name in ("fabricctl run --duration", "fabricctl web --duration", "fabricctl run --counters-every",
                 "fabricctl endpoint compare --rate", "fabricctl endpoint compare --seconds", "fabricctl --timeout",
                 "fabricctl run --carrier-events", "fabricctl --topology"):
        assert name in found, name
    assert len(OPTIONS) > 100


@pytest.mark.timeout(600, method="thread")  # this test owns SIGALRM (its hang watchdog)
def test_every_option_takes_boundary_values_without_a_traceback(places: dict[str, str], tmp_path: Path):
    problems = []
    taken = 0  # values an option took whose run was judged (not stopped by the sandbox, not left out)
    for opt in OPTIONS:
        for value in places.values():
            out = invoke(opt, value, tmp_path)
            problem = judge(opt, value, out)
            if problem:
                problems.append(problem)
            taken += out is not None and not out.refused and not isinstance(out.exception, Touched)
    assert problems == [], "\n".join(problems)
    assert taken >= 100  # the rule leaves most taken values run to their end (146 when written)


def test_every_numeric_option_refuses_nan_and_inf_as_it_parses():
    """No command can honour an infinite or undefined duration, rate or count; refused before it runs, such a
    value never reaches a wait or a loop (where it ends in a traceback or never ends)."""
    numeric = [o for o in OPTIONS if not isinstance(o.param.type, (click.Path, click.File))]
    assert [f"{o} {v}" for o in numeric for v in ("inf", "-inf", "nan") if not _refused(o, v)] == []


numbers = st.one_of(st.floats(), st.integers(min_value=-(2 ** 80), max_value=2 ** 80)).map(str)


@pytest.mark.timeout(600, method="thread")
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(opt=st.sampled_from([o for o in OPTIONS if not isinstance(o.param.type, (click.Path, click.File))]),
       value=numbers)
def test_any_number_in_any_numeric_option(opt: Opt, value: str, tmp_path_factory: pytest.TempPathFactory):
    where = tmp_path_factory.mktemp("any")
    assert judge(opt, value, invoke(opt, value, where)) is None
