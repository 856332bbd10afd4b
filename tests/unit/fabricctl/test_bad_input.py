"""Bad input cannot hurt: bounds before allocation, strict YAML, names, types, timeouts, corrupt files,
a p4c that writes half its outputs, labs without Mininet, and simple_switch_grpc builds without
Thrift or nanomsg. Each case is one `error:` line and a documented exit code, never a traceback."""

from __future__ import annotations

from tests.paths import REPO

from tests.paths import UNIT_DATA

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from controller.programs import p4compile
from fabricctl.main import cli
from controller.state.statefile import load_state
from controller.programs.p4compile import CompileError, compile_program
from controller.programs.toolchain import Artifacts
from mininet_labs import bmv2proc
from tests.unit.usage import says
from tests.require import need

LAB = UNIT_DATA / "two_plane_lab.yaml"
CLEAN_ENV = {"FABRIC_TOPOLOGY": None, "FABRIC_STATE": None, "FABRIC_CONFIG": None, "FABRIC_TIMEOUT": None,
             "FABRIC_PROGRAM": None, "FABRIC_ELECTION_ID": None, "FABRIC_VERBOSE": None}


def run(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner(env={**CLEAN_ENV, **(env or {})}).invoke(cli, list(args), prog_name="fabricctl")


def one_error(result: Result, code: int) -> str:
    """The single `error:` line of a failed command (asserting there is exactly one, no traceback)."""
    assert result.exit_code == code, (result.exit_code, result.stderr, result.exception)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def limited(memory: int = 1 << 30):  # type: ignore[no-untyped-def]
    """preexec_fn: cap the child's heap (RLIMIT_DATA), so a memory blow-up fails instead of swapping."""
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    return apply


def fabricctl(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABRIC_")}
    return subprocess.run([sys.executable, "-m", "fabricctl", *args], capture_output=True, text=True,
                          cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, timeout=timeout,
                          preexec_fn=limited(), **kw)


def lab_with(tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    doc = yaml.safe_load(LAB.read_text())
    edit(doc)
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def switch(doc: dict, name: str) -> dict:  # type: ignore[type-arg]
    return next(s for s in doc["switches"] if s["name"] == name)


# --- bounds and types of the topology ----------------------------------------------------------

@pytest.mark.parametrize("edit, problem", [
    (lambda d: switch(d, "p0-t1-0").update(plane=10**12), "switch p0-t1-0: plane: 1000000000000 is out of range 0..15"),
    (lambda d: switch(d, "p0-t1-0").update(plane=16), "switch p0-t1-0: plane: 16 is out of range 0..15"),
    (lambda d: switch(d, "p0-t0-0").update(index=10**9), "switch p0-t0-0: index: 1000000000 is out of range 0..2047"),
    (lambda d: switch(d, "p0-t1-0").update(index=1023), "switch p0-t1-0: index: 1023 is out of range 0..1022"),
    (lambda d: switch(d, "p0-t1-0").update(device_id=2**64), "switch p0-t1-0: device_id: 18446744073709551616 is "
                                                            "out of range 0..18446744073709551615"),
    (lambda d: switch(d, "p0-t1-0").update(device_id=-1), "switch p0-t1-0: device_id: -1 is out of range"),
    (lambda d: switch(d, "p0-t1-0").update(device_id="7"), "switch p0-t1-0: device_id: expected an integer "
                                                          "0..18446744073709551615, got a string '7'"),
    (lambda d: switch(d, "p0-t1-0").update(plane=True), "switch p0-t1-0: plane: expected an integer 0..15, got a "
                                                       "boolean 'True'"),
    (lambda d: switch(d, "p0-t1-0").update(grpc="127.0.0.1:99999"), "switch p0-t1-0: grpc: '127.0.0.1:99999': port "
                                                                    "'99999' is not a number 1..65535"),
    (lambda d: switch(d, "p0-t1-0").update(grpc="host:http"), "port 'http' is not a number 1..65535"),
    (lambda d: switch(d, "p0-t1-0").update(grpc="unix:relative.sock"), "is not unix:/absolute/path"),
    (lambda d: switch(d, "p0-t1-0").update(grpc="bad host!:50001"), "'bad host!' is not a host name or address"),
    (lambda d: switch(d, "p0-t1-0").update(grpc=50001), "switch p0-t1-0: grpc: expected a gRPC address (a string), "
                                                        "got an integer"),
    (lambda d: switch(d, "p0-t0-0").update(hosts={"h0": 1.0, "h1": 2}), "port '1.0' of p0-t0-0 is not an integer "
                                                                        "(got a number)"),
    (lambda d: switch(d, "p0-t0-0").update(hosts={"h0": True, "h1": 2}), "port 'True' of p0-t0-0 is not an integer "
                                                                         "(got a boolean)"),
    (lambda d: switch(d, "p0-t0-0").update(hosts={"h0": 511, "h1": 2}), "port 511 of p0-t0-0 out of range 1..510"),
    (lambda d: switch(d, "p0-t0-0").update(hosts={"h0": 255, "h1": 2}), "port 255 of p0-t0-0 is the CPU port"),
    (lambda d: switch(d, "p0-t0-0").update(hosts=[1, 2]), "switch p0-t0-0: hosts: expected a mapping, got a list"),
    (lambda d: switch(d, "p0-t0-0").update(hosts={f"h{i}": i + 1 for i in range(1100)}),
     "switch p0-t0-0: 1100 hosts: a leaf holds at most 1023 (the End.DX6 range of the SID plan)"),
    (lambda d: d.update(max_port=100000), "max_port: 100000 is out of range 1..510"),
    (lambda d: d.update(max_port="510"), "max_port: expected an integer 1..510, got a string '510'"),
    (lambda d: d.update(cpu_port=512), "cpu_port: 512 is out of range 1..511"),
    (lambda d: d.update(name=["x"]), "name: expected a printable string, got a list"),
    (lambda d: switch(d, "p0-t1-0").update(name=["p0-t1-0"]), "switch #0: name: expected a name (a string), got a list"),
    (lambda d: switch(d, "p0-t1-0").update(name="p0/t1-0"), "switch #0: name: name 'p0/t1-0' may hold only letters, "
                                                            "digits, '.', '_' and '-'"),
    (lambda d: switch(d, "p0-t1-0").update(name="p0-t1-0\nerror: forged"), "may hold only letters, digits"),
    (lambda d: switch(d, "p0-t0-0").update(hosts={"../h0": 1, "h1": 2}), "switch p0-t0-0: hosts: name '../h0' may "
                                                                          "hold only letters"),
    (lambda d: switch(d, "p0-t0-0").update(hosts={"h 0": 1, "h1": 2}), "switch p0-t0-0: hosts: name 'h 0' may hold"),
])
def test_topology_fields_are_bounded_and_typed(tmp_path: Path, edit, problem: str) -> None:  # type: ignore[no-untyped-def]
    path = lab_with(tmp_path, edit)
    result = run("--topology", str(path), "topo", "validate")
    assert result.exit_code == 3
    assert any(line.startswith(f"error: {path}: ") and problem in line for line in result.stderr.splitlines()), \
        result.stderr
    line = one_error(run("--topology", str(path), "plan"), 3)  # the same at load, for any command
    assert line.startswith(f"error: topology {path} is invalid: ")


def test_duplicate_yaml_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(LAB.read_text().replace("name: two_plane_lab\n", "name: two_plane_lab\nname: other\n"))
    result = run("--topology", str(path), "topo", "validate")
    assert (result.exit_code, result.stderr) == (3, f"error: {path}: not valid YAML: line 5: duplicate key 'name'\n")
    path.write_text(LAB.read_text().replace("device_id: 3,", "device_id: 3, device_id: 9,", 1)
                    .replace("device_id: 3\n", "device_id: 3\n    device_id: 9\n", 1))
    assert "duplicate key 'device_id'" in run("--topology", str(path), "topo", "validate").stderr


# --- resource bombs: one error line, bounded memory ---------------------------------------------

def _alias_bomb() -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for prev, name in zip("abcdefgh", "bcdefghi"):
        text += f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    return text + "switches: *i\n"


def _deep_yaml() -> str:
    return "switches: " + "[" * 200_000 + "]" * 200_000 + "\n"


@pytest.mark.parametrize("kind, expected", [
    ("alias bomb", "more than 4000000 values once aliases are expanded: refused (an alias bomb?)"),
    ("many aliases", "more than 256 aliases (*name): refused (an alias bomb?)"),
    ("deep", "line 1: nested more than 64 levels deep"),
    ("binary", "not valid YAML: offset 0: #x80 is not text YAML allows (binary data?)"),
    ("nul", "not valid YAML: offset 8: #x00 is not text YAML allows (binary data?)"),
    ("huge", "is larger than 256 MiB"),
    ("dev zero", "is a device, not a regular file"),
])
def test_topology_bombs_fail_in_one_line_with_bounded_memory(tmp_path: Path, kind: str, expected: str) -> None:
    path = tmp_path / "t.yaml"
    if kind == "alias bomb":
        path.write_text(_alias_bomb())
    elif kind == "many aliases":
        path.write_text("x: &x 1\nswitches: [" + ", ".join(["*x"] * 300) + "]\n")
    elif kind == "deep":
        path.write_text(_deep_yaml())
    elif kind == "binary":
        path.write_bytes(bytes(range(128, 256)) * 100)
    elif kind == "nul":
        path.write_bytes(b"name: x\n\0\0\0")
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(300 << 20)  # sparse: 300 MiB of zeros
    else:
        path = Path("/dev/zero")
    result = fabricctl("--topology", str(path), "topo", "validate")
    assert result.returncode in (2, 3), result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], result.stderr


@pytest.mark.parametrize("text, expected", [
    ('{"format": "srv6-fabric-state/1", "failures": [{"host_port": ["p0-t0-0", Infinity]}]}',
     "not valid JSON: Infinity is not a number JSON allows"),
    ('{"format": "srv6-fabric-state/1", "failures": [{"host_port": ["p0-t0-0", 1e999]}]}',
     "not valid JSON: 1e999 overflows a float"),
    ('{"format": "srv6-fabric-state/1", "failures": [{"host_port": ["p0-t0-0", 1.0]}]}',
     "failures[0].host_port[1]: 1.0 is not a port number (an integer 0..511)"),
    ('{"format": "srv6-fabric-state/1", "failures": [{"host_port": ["p0-t0-0", NaN]}]}', "NaN is not a number"),
    ('{"failures": ' + "[" * 100_000 + "]" * 100_000 + "}", "not valid JSON: nested too deeply"),
    ('{"failures": [{"switch": ["p0-t1-0"]}]}', "failures[0].switch: expected a name (a string), got a list"),
    ('{"failures": [{"switch": "p0-t1-0\\nerror: forged"}]}', "may hold only letters, digits"),
    ('{"failures": [{"link": ["p0-t0-0"]}]}', "failures[0]: {\"link\": [\"p0-t0-0\"]} is not a failure"),
])
def test_bad_state_files_are_one_line(tmp_path: Path, text: str, expected: str) -> None:
    shutil.copy(LAB, tmp_path / "lab.yaml")
    state = tmp_path / ".fabric-state.json"
    state.write_text(text)
    before = state.read_bytes()
    for args in (("status", "--offline"), ("fail", "switch", "p0-t1-0", "--no-apply")):
        line = one_error(run("--topology", str(tmp_path / "lab.yaml"), *args), 2)
        assert line.startswith(f"error: state file {state}: ") and expected in line, line
    assert state.read_bytes() == before


def test_a_huge_state_file_is_refused_unread(tmp_path: Path) -> None:
    shutil.copy(LAB, tmp_path / "lab.yaml")
    state = tmp_path / ".fabric-state.json"
    with open(state, "wb") as f:
        f.truncate(1 << 30)  # sparse
    result = fabricctl("--topology", str(tmp_path / "lab.yaml"), "status", "--offline")
    assert (result.returncode, result.stderr) == (2, f"error: state file {state} is larger than 4 MiB\n")


# --- timeouts and connections --------------------------------------------------------------------

@pytest.mark.parametrize("value, message", [
    ("nan", "nan is not a finite number of seconds"),
    ("inf", "inf is not a finite number of seconds"),
    ("-inf", "-inf is not a finite number of seconds"),
    ("0", "0 is out of range (0, 86400] seconds"),
    ("-3", "-3 is out of range (0, 86400] seconds"),
    ("1e9", "1e+09 is out of range (0, 86400] seconds"),
    ("soon", "'soon' is not a number of seconds"),
])
def test_timeouts_are_checked_at_parse_time(value: str, message: str) -> None:
    for result in (run("--timeout", value, "plan"), run("plan", "--timeout", value),
                   run("plan", env={"FABRIC_TIMEOUT": value})):
        line = one_error(result, 2)
        says(line, "--timeout", message, "(see 'fabricctl --help')")


@pytest.mark.parametrize("args", [("traffic", "--rate", "nan"), ("balance", "--rate", "inf"),
                                  ("fail-scenario", "link", "p0-t0-0", "p0-t1-0", "--seconds", "inf"),
                                  ("cross-plane", "h0", "--fail-at", "nan")])
def test_lab_durations_and_rates_are_finite(tmp_path: Path, args: tuple[str, ...]) -> None:
    line = one_error(run("lab", *args, "--dir", str(tmp_path)), 2)
    says(line, args[-2], args[-1], "is not a finite number")


def test_ctrl_c_stops_a_command_waiting_on_a_switch_at_once(tmp_path: Path) -> None:
    """A switch that accepts the connection but never speaks HTTP/2 keeps the connect waiting (--timeout
    600); SIGINT ends the command with one line and exit 130. The switch is a unix socket of this test:
    a TCP port from bind(0) can be one a lab switch of an earlier test had, and a client still trying
    that switch would be the connection accepted here."""
    with socket.socket(socket.AF_UNIX) as server:
        sock = tmp_path / "switch.sock"
        server.bind(str(sock))
        server.listen(8)
        path = lab_with(tmp_path, lambda d: switch(d, "p0-t0-0").update(grpc=f"unix:{sock}"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("FABRIC_")}
        # SIGINT as a terminal delivers it: pytest started as a background job of a non-interactive shell
        # inherits it ignored, and a command started with SIGINT ignored rightly keeps ignoring it
        proc = subprocess.Popen([sys.executable, "-m", "fabricctl", "--topology", str(path), "--timeout", "600",
                                 "install", "p0-t0-0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=REPO, env={**env, "PYTHONPATH": str(REPO)},
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        server.settimeout(60)
        peer, _ = server.accept()  # the command is now connecting
        try:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            peer.close()
            proc.kill()
    assert (proc.returncode, err, out) == (130, "error: interrupted\n", "")


# --- corrupt artifacts, half-written compiler output ----------------------------------------------

def test_a_corrupt_p4info_is_one_line_exit_5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build = tmp_path / "build"
    build.mkdir()
    (build / "srv6_spray.p4info.txtpb").write_bytes(b"tables { preamble { id: \xff\xfe garbage")
    (build / "srv6_spray.json").write_text("{}")
    monkeypatch.setattr(Artifacts, "of", classmethod(lambda cls, program, out_dir=build: Artifacts(
        program, build / f"{program}.json", build / f"{program}.p4info.txtpb")))
    shutil.copy(LAB, tmp_path / "lab.yaml")
    line = one_error(run("--topology", str(tmp_path / "lab.yaml"), "install", "--dry-run"), 5)
    assert line.startswith(f"error: cannot read the P4Info {build}/srv6_spray.p4info.txtpb: ")
    (build / "srv6_spray.p4info.txtpb").write_text("tables { preamble { id: 1 name: 'x' } nonsense_field: 3 }\n")
    line = one_error(run("--topology", str(tmp_path / "lab.yaml"), "install", "--dry-run"), 5)
    assert line.startswith(f"error: the P4Info {build}/srv6_spray.p4info.txtpb: not a P4Info: ")
    assert line.endswith("(run 'fabricctl p4 compile')")


def test_a_p4c_that_writes_one_artifact_replaces_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in p4c-bm2-ss that exits 0 after writing only the bmv2 JSON: the build directory keeps
    both old artifacts, byte for byte, and the error says what is missing."""
    fake = tmp_path / "p4c-bm2-ss"
    fake.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && echo "{\\"new\\": 1}" > "$2"; shift; done\n')
    fake.chmod(0o755)
    monkeypatch.setattr(p4compile, "bmv2_backend", lambda: str(fake))
    out = tmp_path / "build"
    out.mkdir()
    old = Artifacts.of("srv6_spray", out)
    old.bmv2_json.write_text("old json")
    old.p4info.write_text("old p4info")
    with pytest.raises(CompileError, match=rf"^p4c exited 0 on p4/srv6_spray.p4 but did not write "
                                           rf"srv6_spray.p4info.txtpb: nothing in {out} was replaced$"):
        compile_program("srv6_spray", out)
    assert (old.bmv2_json.read_text(), old.p4info.read_text()) == ("old json", "old p4info")
    assert sorted(p.name for p in out.iterdir()) == ["srv6_spray.json", "srv6_spray.p4info.txtpb"]


# --- labs -----------------------------------------------------------------------------------------

def test_lab_down_needs_no_mininet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With Mininet unimportable, `lab down` on a directory holding only a topology (a crashed lab
    without its state) still runs: no lab interfaces can exist without Mininet."""
    from mininet_labs import _mininet

    for name in [m for m in sys.modules if m == "mininet" or m.startswith(("mininet.", "mininet_labs.topo",
                                                                           "mininet_labs.switch",
                                                                           "mininet_labs.fabrictopo",
                                                                           "mininet_labs.bmv2switch"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mininet", None)  # import mininet raises ImportError
    monkeypatch.setattr(_mininet, "DEBIAN_DIRS", ())
    shutil.copy(LAB, tmp_path / "topology.yaml")
    result = run("lab", "down", "--dir", str(tmp_path), "--json")
    assert result.exit_code == 0, (result.stderr, result.exception)
    assert json.loads(result.stdout) == {"clean": True, "killed": [], "deleted_intfs": [], "leftover_pids": [],
                                         "leftover_intfs": []}


def test_a_path_without_ifconfig_is_named_not_an_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian's user PATH lacks /usr/sbin, where ifconfig is: Mininet would exit(1) building a node, so
    the lab's check names it (and the Mininet tier skips with that reason)."""
    from mininet_labs import _mininet

    try:
        _mininet.load()
    except _mininet.MininetMissing as e:
        need("mininet", False, str(e))
    (tmp_path / "mnexec").write_text("#!/bin/sh\n")
    (tmp_path / "mnexec").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _mininet.missing() == ("ifconfig not found on PATH, which Mininet needs (Debian's net-tools, in "
                                  "/usr/sbin: a PATH without it?)")


def test_the_lab_and_endpoint_libraries_load_without_mininet() -> None:
    """Without Mininet the libraries import (names, ports, checks, faults); Mininet is needed, and
    named with its Debian package, only by the modules of the Mininet classes themselves."""
    code = """
import sys
sys.modules["mininet"] = None  # import mininet raises ImportError
from mininet_labs import _mininet
_mininet.DEBIAN_DIRS = ()
import endpoint.faults, endpoint.incast, mininet_labs.lab, mininet_labs.topo, mininet_labs.switch
print(mininet_labs.switch.THRIFT_OFFSET, mininet_labs.topo.check.__name__)
for module, name in (("mininet_labs.fabrictopo", "FabricTopo"), ("mininet_labs.bmv2switch", "Bmv2Switch")):
    try:
        __import__(module)
    except _mininet.MininetMissing as e:
        print(name, e)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    missing = "Mininet is not installed: install Debian's package 'mininet' (apt-get install mininet)"
    assert result.stdout.splitlines() == ["10000 check", f"FabricTopo {missing}", f"Bmv2Switch {missing}"]


@pytest.mark.parametrize("text, expected", [
    ("{not json", "cannot read lab state"),
    ("[1, 2]", "is not a lab state (no \"format\": \"srv6-fabric-lab/1\")"),
    ('{"format": "srv6-fabric-lab/1", "pid": 1}', "is malformed: "),
    ('{"format": "srv6-fabric-lab/1", "lab_dir": "x", "topology": "t", "program": "p", "tag": "", "pid": "1"}',
     "is malformed: pid '1' is not a process id"),
    ('{"format": "srv6-fabric-lab/1", "lab_dir": "x", "topology": "t", "program": "p", "tag": "", "pid": 1, '
     '"intfs": {"a": 1}}', "is malformed: intfs is a mapping, expected list"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_a_corrupt_lab_state_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    state = tmp_path / "lab-state.json"
    state.write_text(text)
    line = one_error(run("lab", "down", "--dir", str(tmp_path)), 2)
    assert expected in line, line
    status = run("lab", "status", "--dir", str(tmp_path))
    assert expected in one_error(status, status.exit_code) and status.exit_code in (1, 5)
    assert state.read_text() == text


@pytest.mark.parametrize("args, expected, code", [
    (("--t0", "100000"), ("--t0", "100000", "2048"), 2),  # click's range check: the option, value, bound
    (("--hosts", "10000000000"), ("--hosts", "10000000000"), 2),
    (("--planes", "16", "--t1", "8", "--t0", "100", "--hosts", "1"),
     ("a lab of 1728 switches: at most",), 2),  # 128 bmv2 switches, or 512 on the kernel data plane
    (("--t1", "600", "--t0", "2"), ("no such fabric: a t0 needs 602 data ports: port 603 is beyond max_port 510",), 3),
])
def test_absurd_lab_sizes_are_refused_before_anything_starts(tmp_path: Path, args: tuple[str, ...],
                                                             expected: tuple[str, ...], code: int) -> None:
    says(one_error(run("lab", "up", "--dir", str(tmp_path / "lab"), *args), code), *expected)
    assert not (tmp_path / "lab").exists()


def test_a_bad_port_poll_is_refused_before_anything_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    says(one_error(run("lab", "up", "--dir", str(tmp_path / "lab"), "--dataplane", "bmv2", "--port-poll-ms", "0"), 2),
         "--port-poll-ms", "0", "1<=x<=60000")
    monkeypatch.setenv("BM_PORT_MONITOR_MS", "fast")
    monkeypatch.setattr("mininet_labs.backends.choose", lambda dataplane: ("bmv2", ""))
    line = one_error(run("lab", "up", "--dir", str(tmp_path / "lab"), "--dataplane", "bmv2"), 2)
    assert line == "error: BM_PORT_MONITOR_MS='fast' is not a whole number of milliseconds in 1-60000", line
    assert not (tmp_path / "lab").exists()


# --- simple_switch_grpc builds ----------------------------------------------------------------------

REAL_HELP = """Usage: SWITCH_NAME [options] <path to JSON config file>
Options:
  -h [ --help ]               Display this help message
  -i [ --interface ] arg      <port-num>@<interface-name>: Attach network
  --pcap [=arg(=.)]           Generate pcap files for interfaces.
  {thrift}
  --device-id arg             Device ID, used to identify the device in IPC
  --log-file arg              Enable logging to given file
  -L [ --log-level ] arg      Set log level
  --log-flush                 If used with '--log-file', the logger will flush
  {nanomsg}
  --no-p4                     Enable the switch to start without an inout
"""


def fake_switch(tmp_path: Path, thrift: bool, nanomsg: bool, no_p4: bool = True) -> str:
    """A shell script standing in for a simple_switch_grpc built with or without Thrift/nanomsg: it
    prints that build's usage text for --help, and like bmv2 refuses an option it lacks."""
    text = REAL_HELP.format(thrift="--thrift-port arg           TCP port of the Thrift server" if thrift else "",
                            nanomsg="--notifications-addr arg    nanomsg address" if nanomsg else "")
    if not no_p4:
        text = text.replace("--no-p4", "--p4-only")
    path = tmp_path / f"ssg-{int(thrift)}{int(nanomsg)}{int(no_p4)}"
    path.write_text(f"#!/bin/sh\nif [ \"$1\" = --help ]; then cat <<'EOF'\n{text}EOF\nexit 0; fi\n"
                    "echo \"unrecognised option '$1'\" >&2; exit 1\n")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("thrift, nanomsg", [(True, True), (False, True), (True, False), (False, False)])
def test_the_switch_command_uses_only_what_the_binary_was_built_with(tmp_path: Path, thrift: bool,
                                                                     nanomsg: bool) -> None:
    build = bmv2proc.probe(fake_switch(tmp_path, thrift, nanomsg))
    assert (build.thrift, build.nanomsg) == (thrift, nanomsg)
    cmd = bmv2proc.command(build, device_id=3, thrift_port=60999, log_base=tmp_path / "s1", log_level="warn",
                           notifications=tmp_path / "s1-notifications.ipc", pcap_dir=None,
                           ports={2: "s1-eth2", 1: "s1-eth1"}, grpc_addr="127.0.0.1:50999", cpu_port=255)
    assert cmd == [build.binary, "--device-id", "3", *(["--thrift-port", "60999"] if thrift else []),
                   "--log-file", str(tmp_path / "s1"), "--log-flush", "--log-level", "warn",
                   *(["--notifications-addr", f"ipc://{tmp_path}/s1-notifications.ipc"] if nanomsg else []),
                   "-i", "1@s1-eth1", "-i", "2@s1-eth2",
                   "--no-p4", "--", "--grpc-server-addr", "127.0.0.1:50999", "--cpu-port", "255"]


@pytest.mark.parametrize("has_it", [True, False])
def test_switches_get_the_trim_priority_queue_where_the_binary_has_priority_queues(tmp_path: Path,
                                                                                  has_it: bool) -> None:
    """p4/include/congestion.p4 sends trimmed headers to priority 1: bmv2 needs --priority-queues 2 for it."""
    binary = fake_switch(tmp_path, True, True)
    if has_it:
        text = Path(binary).read_text().replace("  --no-p4", "  --priority-queues arg  Number of priority queues\n  --no-p4")
        Path(binary).write_text(text)
    build = bmv2proc.probe(binary)
    assert build.priority_queues == has_it
    assert build.target_args() == (["--priority-queues", "2"] if has_it else [])
    cmd = bmv2proc.command(build, device_id=3, thrift_port=60999, log_base=tmp_path / "s1", log_level="warn",
                           notifications=tmp_path / "s1-notifications.ipc", pcap_dir=None, ports={1: "s1-eth1"},
                           grpc_addr="127.0.0.1:50999", cpu_port=255)
    assert cmd[cmd.index("--"):] == ["--", "--grpc-server-addr", "127.0.0.1:50999", "--cpu-port", "255",
                                     *(["--priority-queues", "2"] if has_it else [])]


def test_a_binary_without_no_p4_is_named_with_what_it_lacks(tmp_path: Path) -> None:
    binary = fake_switch(tmp_path, True, True, no_p4=False)
    with pytest.raises(bmv2proc.SwitchStartError, match=rf"^{binary} is not a simple_switch_grpc the lab can run: "
                                                        r"its --help lists no --no-p4 \(it says: Usage: SWITCH_NAME"):
        bmv2proc.probe(binary)


def test_a_failed_start_never_quotes_an_earlier_runs_log(tmp_path: Path) -> None:
    log, out = tmp_path / "s1.txt", tmp_path / "s1.out"
    log.write_text("[old run] thrift server could not bind port 9090\n")
    bmv2proc.fresh_logs([log])
    with open(out, "wb") as f:
        proc = subprocess.Popen(["sh", "-c", "echo 'this run: missing option'; exit 1"], stdout=f)
        proc.wait()
    with pytest.raises(bmv2proc.SwitchStartError) as err:
        bmv2proc.wait_grpc_ready(f"unix:{tmp_path}/none.sock", proc, 0, "s1", (out, log))
    assert str(err.value) == "s1: simple_switch_grpc exited (1): this run: missing option"
    assert not log.exists()


def test_state_is_untouched_by_every_bad_input_above(tmp_path: Path) -> None:
    """The loaders never create a state file: a command failing on its input leaves the directory as it was."""
    shutil.copy(LAB, tmp_path / "lab.yaml")
    run("--topology", str(tmp_path / "lab.yaml"), "--timeout", "nan", "fail", "switch", "p0-t1-0", "--no-apply")
    run("--topology", str(tmp_path / "lab.yaml"), "fail", "switch", "nope", "--no-apply")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab.yaml"]
    assert load_state(tmp_path / ".fabric-state.json") == frozenset()


def test_a_thread_that_raises_as_ctrl_c_exits_adds_nothing_to_its_one_line() -> None:
    # the race a loaded machine showed: a thread of an abandoned switch call raised between the line and the exit
    code = ("import threading, click\n"
            "from fabricctl import context\n"
            "echo = click.echo\n"
            "def echo_then_raise(*a, **k):\n"
            "    echo(*a, **k)\n"
            "    t = threading.Thread(target=lambda: 1 / 0)\n"
            "    t.start()\n"
            "    t.join()\n"
            "context.click.echo = echo_then_raise\n"
            "context._interrupted()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (proc.returncode, proc.stderr, proc.stdout) == (130, "error: interrupted\n", "")
