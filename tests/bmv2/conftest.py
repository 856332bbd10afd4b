"""Fixtures of the bmv2 tier: a real simple_switch_grpc in a fresh network namespace per module."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator

import pytest

from controller.plan.entries import Entity
from controller.runtime.p4rt import SwitchConnection
from controller.programs.toolchain import Artifacts, find_binary
from mininet_labs.netns import can_create_netns
from mininet_labs.nsswitch import NetnsSwitch


def require_bmv2() -> None:
    """Skip, naming what is missing, unless simple_switch_grpc and namespaces are available."""
    if find_binary("simple_switch_grpc") is None:
        pytest.skip("simple_switch_grpc not found on PATH (or $SIMPLE_SWITCH_GRPC / $P4_TOOLCHAIN_BIN)")
    why = can_create_netns()
    if why:
        pytest.skip(why)


@dataclass
class Device:
    """A started switch, our P4Runtime session to it, and the program it runs."""

    switch: NetnsSwitch
    conn: SwitchConnection
    artifacts: Artifacts

    def reset(self) -> None:
        """A fresh pipeline: empty tables, zero counters, nothing queued on the ports."""
        self.conn.set_pipeline(self.artifacts)
        self.switch.drain()

    def install(self, *entities: Entity) -> None:
        self.conn.write([("INSERT", e) for e in entities])

    def counter(self, name: str, index: int):
        (value,) = self.conn.read_counter(name, index)
        return value

    def drop_counts(self) -> dict[int, int]:
        return {c.index: c.packets for c in self.conn.read_counter("IngressPipe.drop_reasons")}


def _device(ns: str, program: str, ports: tuple[int, ...]) -> Iterator[Device]:
    require_bmv2()
    switch = NetnsSwitch(f"{ns}{os.getpid()}", ports=ports)
    switch.start()
    try:
        conn = SwitchConnection(ns, switch.grpc_address, device_id=switch.device_id, election_id=10)
        conn.connect()
        try:
            yield Device(switch, conn, Artifacts.of(program))
        finally:
            conn.close()
    finally:
        switch.stop()


@pytest.fixture(scope="module")
def spray_device() -> Iterator[Device]:
    yield from _device("spr", "srv6_spray", (1, 2, 3, 4, 5))


@pytest.fixture
def spray(spray_device: Device) -> Device:
    spray_device.reset()
    return spray_device


@pytest.fixture(scope="module")
def ecmp_device() -> Iterator[Device]:
    yield from _device("ecm", "eecmp_qp_hash", (1, 2, 3, 4, 5))


@pytest.fixture
def ecmp(ecmp_device: Device) -> Device:
    ecmp_device.reset()
    return ecmp_device
