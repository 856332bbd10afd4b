"""Which bmv2 build a lab or bench runs, the port poll its switches get, and the lab's watch ports by build."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from controller.programs.bmv2build import Bmv2Traits
from mininet_labs import bmv2proc
from mininet_labs.labstate import default_topology


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def toolchain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A toolchain directory: bin/simple_switch_grpc (the logging build), $P4_TOOLCHAIN_BIN naming it."""
    executable(tmp_path / "bin/simple_switch_grpc")
    monkeypatch.setenv("P4_TOOLCHAIN_BIN", str(tmp_path / "bin"))
    monkeypatch.delenv("SIMPLE_SWITCH_GRPC", raising=False)
    return tmp_path


def test_the_throughput_build_runs_where_it_exists_unless_packet_logs_are_asked_for(toolchain: Path):
    logging = str(toolchain / "bin/simple_switch_grpc")
    assert bmv2proc.lab_binary("warn") == logging  # no perf/bin: the one found
    fast = str(executable(toolchain / "perf/bin/simple_switch_grpc"))
    assert [bmv2proc.lab_binary(level) for level in ("warn", "info", "off", "debug", "trace")] == \
        [fast, fast, fast, logging, logging]


def test_a_binary_named_by_simple_switch_grpc_runs_as_named(toolchain: Path, monkeypatch: pytest.MonkeyPatch):
    executable(toolchain / "perf/bin/simple_switch_grpc")
    named = str(executable(toolchain / "other/simple_switch_grpc"))
    monkeypatch.setenv("SIMPLE_SWITCH_GRPC", named)
    assert bmv2proc.lab_binary("warn") == named


def test_no_switch_found_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SIMPLE_SWITCH_GRPC", str(tmp_path / "missing"))
    assert bmv2proc.lab_binary("warn") is None


def test_the_port_poll_comes_from_the_environment_or_the_default(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("BM_PORT_MONITOR_MS", raising=False)
    assert bmv2proc.port_poll_ms() == bmv2proc.DEFAULT_PORT_POLL_MS
    monkeypatch.setenv("BM_PORT_MONITOR_MS", "25")
    assert bmv2proc.port_poll_ms() == 25
    for bad in ("0", "60001", "fast", "-5", "2.5"):
        monkeypatch.setenv("BM_PORT_MONITOR_MS", bad)
        with pytest.raises(ValueError) as e:
            bmv2proc.port_poll_ms()
        assert str(e.value) == f"BM_PORT_MONITOR_MS={bad!r} is not a whole number of milliseconds in 1-60000"


def test_the_switch_command_carries_its_port_poll_and_says_so_when_read_back(tmp_path: Path):
    build = bmv2proc.Bmv2Build(str(tmp_path / "simple_switch_grpc"), thrift=False, nanomsg=False)
    cmd = bmv2proc.command(build, device_id=3, thrift_port=60999, log_base=tmp_path / "s1", log_level="warn",
                           notifications=tmp_path / "n.ipc", pcap_dir=None, ports={1: "s1-eth1"},
                           grpc_addr="127.0.0.1:50999", cpu_port=255, poll_ms=10)
    assert cmd[:4] == ["env", "BM_PORT_MONITOR_MS=10", build.binary, "--device-id"]
    assert bmv2proc.build_of(cmd)["port_poll_ms"] == 10
    assert bmv2proc.build_of(cmd)["binary"] == build.binary
    assert bmv2proc.build_of(cmd[2:])["port_poll_ms"] is None  # bmv2's own 200 ms
    switches = {"a": {"argv": cmd}, "b": {"argv": cmd}, "c": {"pid": None}}
    assert bmv2proc.lab_builds(switches) == [bmv2proc.build_of(cmd)]


def test_watch_ports_are_on_by_default_only_where_the_build_survives_every_member_down():
    model = default_topology()
    assert not model.watch_ports
    safe = Bmv2Traits("/x/simple_switch_grpc", True, True, True, False)
    on, line = bmv2proc.with_watch_ports(model, safe)
    assert on.watch_ports and line is None
    stock = Bmv2Traits("/x/simple_switch_grpc", True, False, False, True)
    off, line = bmv2proc.with_watch_ports(model, stock)
    assert off is model and line == stock.watch_ports_line()
    assert line is not None and line.startswith("watch ports off: /x/simple_switch_grpc is built without ")
    assert bmv2proc.with_watch_ports(on, stock) == (on, None)  # the topology asks for them itself
