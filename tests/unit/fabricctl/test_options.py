"""Global options: after the subcommand, from FABRIC_* variables, from a config file (and their
precedence), -v logging of what is written to which switch, shell completion."""

from __future__ import annotations

from tests.paths import REPO

from tests.paths import UNIT_DATA

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fabricctl import options
from fabricctl.main import cli
from controller.plan.entries import Lpm, TableEntry
from controller.runtime.p4info import P4Info
from controller.runtime.p4rt import SwitchConnection
from controller.plan.delta import UpdateType
from tests.unit.p4rt_servicer import RecordingServicer, serve, socket_dir
from tests.unit.usage import says

LAB = UNIT_DATA / "two_plane_lab.yaml"
UNSET = {name: None for _, name, _ in options.GLOBALS.values()}


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner(env={**UNSET, **(env or {})}).invoke(cli, list(args), prog_name="fabricctl")


@pytest.fixture
def lab(tmp_path: Path) -> Path:
    path = tmp_path / "lab.yaml"
    shutil.copy(LAB, path)
    return path


def plan_doc(*args: str, env: dict[str, str] | None = None) -> dict:  # type: ignore[type-arg]
    result = run(*args, env=env)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


# --- after the subcommand ----------------------------------------------------------------------

def test_global_options_after_the_subcommand(lab: Path) -> None:
    before = plan_doc("--topology", str(lab), "--program", "eecmp_qp_hash", "plan", "--json")
    after = plan_doc("plan", "--json", "--topology", str(lab), "--program=eecmp_qp_hash", "--timeout", "3")
    assert after == before and after["program"] == "eecmp_qp_hash"
    result = run("fail", "switch", "p0-t1-0", "--no-apply", "--topology", str(lab), "--state", str(lab.parent / "s.json"))
    assert result.exit_code == 0 and (lab.parent / "s.json").exists()


def test_hoist_moves_only_global_options_and_nothing_after_double_dash() -> None:
    assert options.hoist(["plan", "--timeout", "3", "p0-t0-0"]) == ["--timeout", "3", "plan", "p0-t0-0"]
    assert options.hoist(["-vv", "install", "--dry-run", "-v"]) == ["-v", "-vv", "install", "--dry-run"]
    assert options.hoist(["lab", "up", "--", "--timeout", "3"]) == ["lab", "up", "--", "--timeout", "3"]
    assert options.hoist(["plan", "--timeout"]) == ["plan", "--timeout"]  # click reports the missing value


# --- environment and config file ----------------------------------------------------------------

def test_every_global_option_has_a_fabric_variable(lab: Path) -> None:
    env = {"FABRIC_TOPOLOGY": str(lab), "FABRIC_PROGRAM": "eecmp_qp_hash", "FABRIC_STATE": str(lab.parent / "st.json"),
           "FABRIC_ELECTION_ID": "0,7", "FABRIC_TIMEOUT": "2.5"}
    assert plan_doc("plan", "--json", env=env)["program"] == "eecmp_qp_hash"
    assert run("fail", "switch", "p0-t1-0", "--no-apply", env=env).exit_code == 0
    assert (lab.parent / "st.json").exists()
    print_cmd = run("shell", "p0-t0-0", "--print-command", env={**env, "FABRIC_PROGRAM": "srv6_spray"}).stdout
    assert "--election-id 0,7" in print_cmd
    bad = run("plan", env={**env, "FABRIC_ELECTION_ID": "0"})
    assert bad.exit_code == 2
    says(bad.stderr, "--election-id", "'0' is not between")
    for opt in ("--topology", "--program", "--state", "--election-id", "--timeout", "--verbose", "--config"):
        name = options.GLOBALS[opt[2:]][1]
        assert name in " ".join(run("--help").stdout.split()) or opt == "--config", name


def test_config_file_and_precedence(lab: Path, tmp_path: Path) -> None:
    """option > environment > config file > default."""
    config = tmp_path / "fabric.yaml"
    config.write_text("topology: lab.yaml\nprogram: eecmp_qp_hash\ntimeout: 4\nelection_id: 9\n")
    assert plan_doc("--config", str(config), "plan", "--json")["program"] == "eecmp_qp_hash"  # config > default
    assert plan_doc("plan", "--json", env={"FABRIC_CONFIG": str(config)})["program"] == "eecmp_qp_hash"
    env = {"FABRIC_CONFIG": str(config), "FABRIC_PROGRAM": "srv6_spray"}
    assert plan_doc("plan", "--json", env=env)["program"] == "srv6_spray"  # env > config
    assert plan_doc("--program", "eecmp_qp_hash", "plan", "--json",
                    env={**env})["program"] == "eecmp_qp_hash"  # option > env
    shown = run("--config", str(config), "shell", "p0-t0-0", "--print-command").stdout
    assert "--election-id 0,9" in shown


@pytest.mark.parametrize("text, message", [
    ("timeout: nan\n", "nan is not a finite number of seconds"),
    ("timeout: .nan\n", "timeout: expected a string or number, got a number"),
    ("timeout: .inf\n", "timeout: expected a string or number"),
    ("timeout: true\n", "timeout: expected a string or number, got a boolean"),
    ("colour: red\n", "unknown key 'colour' (known: topology, program, state, election-id, timeout, verbose, tls-ca, tls-cert, tls-key, tls-server-name, ecn-qdepth, trim-qdepth, trim-dscp, ecn-host-ports, store)"),
    ("- a list\n", "expected a mapping of topology, program, state, election-id, timeout, verbose"),
    ("timeout: 1\ntimeout: 2\n", "not valid YAML: line 2: duplicate key 'timeout'"),
    ("verbose: 9\n", "verbose: 9 is out of range 0..3"),
    ("timeout: -1\n", "-1 is out of range (0, 86400] seconds"),
])
def test_a_bad_config_file_is_one_line(lab: Path, tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    result = run("--topology", str(lab), "--config", str(config), "plan")
    assert result.exit_code == 2
    says(result.stderr, message)


def test_a_missing_config_file_is_one_line(lab: Path, tmp_path: Path) -> None:
    result = run("--topology", str(lab), "plan", env={"FABRIC_CONFIG": str(tmp_path / "none.yaml")})
    assert result.exit_code == 2
    says(result.stderr, "--config", f"{tmp_path / 'none.yaml'}: no such file", "(see 'fabricctl --help')")


# --- -v: what is written to which switch --------------------------------------------------------

@pytest.fixture
def conn(tmp_path: Path, p4info: P4Info) -> Iterator[SwitchConnection]:
    servicer = RecordingServicer()
    with serve(socket_dir(tmp_path), servicer) as address:
        with SwitchConnection("s1", address, device_id=3, election_id=10, p4info=p4info, timeout=5) as c:
            yield c


def _route(i: int) -> TableEntry:
    return TableEntry("routes_v6", (("dst_addr", Lpm(f"fcbb:bb00:{i:x}::", 48)),), "routing.drop")


@pytest.mark.parametrize("verbose", [0, 1, 2])
def test_verbose_logs_each_write_batch_and_with_vv_each_entity(conn: SwitchConnection, verbose: int,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    options.setup_logging(verbose)
    try:
        conn.write([(UpdateType.INSERT, _route(1)), (UpdateType.INSERT, _route(2)), (UpdateType.DELETE, _route(1))],
                   batch_size=2)
    finally:
        options.setup_logging(0)
    lines = capsys.readouterr().err.splitlines()
    where = f"s1 ({conn.address}, device 3)"
    batches = [f"fabricctl: {where}: write batch 1/2: 2 insert, 0 modify, 0 delete",
               f"fabricctl: {where}: write batch 2/2: 0 insert, 0 modify, 1 delete"]
    if verbose == 0:
        assert lines == []
    elif verbose == 1:
        assert lines == batches
    else:
        assert lines[0] == batches[0] and lines[3] == batches[1] and len(lines) == 5
        assert lines[1] == "fabricctl: s1:   insert routes_v6 dst_addr=fcbb:bb00:1::/48"
        assert lines[4] == "fabricctl: s1:   delete routes_v6 dst_addr=fcbb:bb00:1::/48"


def test_verbose_is_a_global_option_and_from_the_environment(lab: Path) -> None:
    for args, env in ((("-vv", "plan"), {}), (("plan", "-v"), {}), (("plan",), {"FABRIC_VERBOSE": "2"})):
        assert run("--topology", str(lab), *args, env=env).exit_code == 0
    assert logging.getLogger(options.LOGGER).level == logging.DEBUG


# --- shell completion ---------------------------------------------------------------------------

def _complete(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("FABRIC_")}
    return subprocess.run([sys.executable, "-c", "from fabricctl.main import main; main()"], capture_output=True,
                          text=True, cwd=REPO, env={**base, "PYTHONPATH": str(REPO), **env}, timeout=60)


def test_shell_completion_as_documented() -> None:
    script = _complete({"_FABRICCTL_COMPLETE": "bash_source"})
    assert script.returncode == 0 and "_fabricctl_completion()" in script.stdout
    assert "complete -o nosort -F _fabricctl_completion fabricctl" in script.stdout
    words = _complete({"_FABRICCTL_COMPLETE": "bash_complete", "COMP_WORDS": "fabricctl re", "COMP_CWORD": "1"})
    assert words.stdout.split() == ["plain,restore"]
    words = _complete({"_FABRICCTL_COMPLETE": "bash_complete", "COMP_WORDS": "fabricctl --prog", "COMP_CWORD": "1"})
    assert words.stdout.split() == ["plain,--program"]
    assert 'eval "$(_FABRICCTL_COMPLETE=bash_source fabricctl)"' in run("--help").stdout
