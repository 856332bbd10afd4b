"""Property: for any topology document and any command line, fabricctl exits with a documented code,
fails with exactly one `error:` line, never prints a traceback, and changes no file when it fails."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricctl import options
from fabricctl.main import cli
from tests.paths import UNIT_DATA

LAB = yaml.safe_load((UNIT_DATA / "two_plane_lab.yaml").read_text())
EXIT_CODES = {0, 1, 2, 3, 4, 5}
UNSET = {name: None for _, name, _ in options.GLOBALS.values()}

values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(), st.booleans(), st.none(),
    st.text(max_size=12), st.sampled_from(["p0-t0-0", "p0-t1-9", "127.0.0.1:0", "unix:x", "a\nb", "../x", "255"]),
    st.lists(st.integers(min_value=-5, max_value=600), max_size=3),
    st.dictionaries(st.sampled_from(["h0", "h9", "p0-t1-0", "p0-t0-1", "x y"]),
                    st.one_of(st.integers(min_value=-5, max_value=600), st.text(max_size=3)), max_size=3))
switch_keys = st.sampled_from(["name", "role", "plane", "index", "device_id", "grpc", "mac", "hosts", "uplinks",
                               "downlinks", "extra"])
doc_keys = st.sampled_from(["name", "max_port", "cpu_port", "usid_block", "switches"])
edits = st.lists(st.one_of(st.tuples(st.just("switch"), st.integers(0, 7), switch_keys, values),
                           st.tuples(st.just("doc"), st.just(0), doc_keys, values),
                           st.tuples(st.just("drop"), st.integers(0, 7), switch_keys, st.none())), max_size=3)
documents = st.one_of(st.just(("edits", [])), edits.map(lambda e: ("edits", e)),
                      st.binary(max_size=64).map(lambda b: ("bytes", b)))

COMMANDS = [["topo", "validate"], ["topo", "show"], ["topo", "show", "p0-t0-0"], ["plan"], ["plan", "--json"],
            ["plan", "--export", "EXPORT"], ["status", "--offline"], ["fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply"],
            ["fail", "switch", "p1-t1-0", "--no-apply"], ["fail", "port", "p0-t0-0", "h1", "--no-apply"],
            ["restore", "all", "--no-apply"], ["restore", "link", "p0-t0-0", "p0-t1-1", "--no-apply"],
            ["shell", "p0-t0-0", "--print-command"], ["install", "--dry-run", "p0-t0-0"]]
TOKENS = ["--timeout", "nan", "inf", "0", "3", "1e999", "--program", "bogus", "eecmp_qp_hash", "--state", "STATE",
          "--json", "--election-id", "0", "1,2", "-v", "p0-t0-0", "p9-t0-0", "h1", "99", "x\ny", "--config", "STATE",
          "--", "--no-apply", "-1"]
command_lines = st.tuples(st.sampled_from(COMMANDS),
                          st.one_of(st.just([]), st.lists(st.sampled_from(TOKENS), min_size=1, max_size=3)),
                          st.integers(0, 4))


def _document(kind: str, payload: Any) -> bytes:
    if kind == "bytes":
        return payload
    doc = copy.deepcopy(LAB)
    for where, n, key, value in payload:
        switches = doc.get("switches")
        if where == "doc":
            doc[key] = value
        elif isinstance(switches, list) and n < len(switches) and isinstance(switches[n], dict):
            if where == "drop":
                switches[n].pop(key, None)
            else:
                switches[n][key] = value
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode()


def _snapshot(d: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and mode (but the state file's lock file, which fail/restore create empty)."""
    return {p.name: (p.read_bytes(), p.stat().st_mode) for p in d.iterdir() if p.is_file()
            and not p.name.endswith(".lock")}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(document=documents, line=command_lines)
def test_any_document_and_command_line(document: tuple[str, Any], line: tuple[list[str], list[str], int]) -> None:
    command, extra, at = line
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        topo = d / "lab.yaml"
        topo.write_bytes(_document(*document))
        state = d / "state.json"
        state.write_text('{"format": "srv6-fabric-state/1", "failures": [{"switch": "p0-t1-0"}]}\n')
        args = [a.replace("STATE", str(state)).replace("EXPORT", str(d / "plan.json")) for a in command]
        extra = [a.replace("STATE", str(state)) for a in extra]
        argv = ["--topology", str(topo), "--state", str(state), *args]
        argv[min(at, len(argv)):min(at, len(argv))] = extra
        before = _snapshot(d)
        result = CliRunner(env={**UNSET}).invoke(cli, argv, prog_name="fabricctl")
        code = result.exit_code
        assert code in EXIT_CODES, (argv, code, result.stderr)
        assert result.exception is None or isinstance(result.exception, SystemExit), (argv, result.exception)
        assert "Traceback" not in result.stderr + result.stdout
        if code == 0:
            return
        errors = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
        listing = command == ["topo", "validate"] and code == 3  # lists every problem, one error line each
        per_switch = code in (1, 4) and command[0] == "install"  # one error line per switch that failed
        assert errors and (len(errors) == 1 or listing or per_switch), (argv, result.stderr)
        assert all(x.startswith("error: ") for x in result.stderr.splitlines()), (argv, result.stderr)
        after = _snapshot(d)
        assert after == before, (argv, set(after) ^ set(before))
        assert not any(p.name.endswith(".tmp") for p in d.iterdir())
