"""The kernel data plane's link probe on the wire, and where each switch port's probes go, without a kernel."""

from __future__ import annotations

from controller.model.topology import load
from controller.southbound.kernelswitch import KernelSwitch, peers_of
from controller.southbound.kroutes import link_local
from controller.southbound.linkprobe import PAYLOAD_LEN, ProbeId, decode, encode
from tests.paths import LAB_YAML


def test_the_probe_payload_round_trips_and_anything_else_is_not_a_probe() -> None:
    p = ProbeId(0xDEADBEEF, 7, 1, 123456, 30_000_000_000_123)
    data = encode(p)
    assert len(data) == PAYLOAD_LEN == 28
    assert decode(data) == p
    assert decode(b"XXXX" + data[4:]) is None
    assert decode(data[:-1]) is None and decode(data + b"\0") is None


def test_each_fabric_port_probes_the_link_local_address_of_the_port_facing_it() -> None:
    topo = load(LAB_YAML)
    leaf, spine = topo.switch("p0-t0-1"), topo.switch("p0-t1-0")
    assert peers_of(topo, leaf) == {port: link_local(s.mac) for port, s in zip(leaf.uplinks, topo.t1s(0))}
    assert peers_of(topo, spine) == {port: link_local(t.mac) for port, t in zip(spine.downlinks, topo.t0s(0))}
    assert peers_of(topo, leaf)[leaf.uplinks[spine.index]] == link_local(spine.mac)


def test_a_namespace_names_what_it_cannot_carry_by_the_services_option_names() -> None:
    from dataclasses import fields

    from controller.service.runner import Config

    assert set(KernelSwitch.cannot) <= {f.name for f in fields(Config)}
    assert not KernelSwitch.arbitrated  # one controller at a time: the service's lease
