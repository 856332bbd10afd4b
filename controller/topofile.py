"""A topology file read and checked (every problem listed), and its switches' TLS settings replaced and checked."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from controller.exitcodes import OpError
from controller.files.safefile import UnsafeFile
from controller.model import limits, yamlload
from controller.model.sids import SidError
from controller.model.tlsconfig import TlsConfig, TlsError, override
from controller.model.topology import Switch, Topology, TopologyError, from_dict
from controller.planning import sid_plan
from controller.runtime.tls import check_all


def check_topology(path: Path) -> tuple[Topology | None, list[str]]:
    """The topology of a YAML file and every problem found in it (the topology is None if any).

    Beyond topology.from_dict: YAML syntax, the document's shape, the uSID block and plan
    capacity, and gRPC addresses a P4Runtime client can dial. An unreadable file is an OpError.
    """
    try:
        doc = yamlload.load_file(path, limits.MAX_TOPOLOGY_BYTES, "topology")
    except UnsafeFile as e:
        raise OpError(str(e)) from None
    except OSError as e:
        raise OpError(f"cannot read topology {path}: {e.strerror or e}") from None
    except yamlload.YamlError as e:
        return None, [str(e)]
    doc = {} if doc is None else doc
    if not isinstance(doc, dict) or not isinstance(doc.get("switches") or [], list):
        return None, ["expected a mapping with a 'switches' list (see examples/two_plane_lab.yaml)"]
    bad = [f"switch #{n} is not a mapping" for n, rec in enumerate(doc.get("switches") or [])
           if not isinstance(rec, dict)]
    if bad:
        return None, bad
    try:
        topo = from_dict(doc, path.parent)
    except TopologyError as e:
        return None, e.problems
    except (TypeError, ValueError, AttributeError, KeyError) as e:
        return None, [f"malformed document: {e}"]
    problems: list[str] = []
    if not topo.switches:
        problems.append("no switches")
    try:
        sids = sid_plan(topo)
    except SidError as e:
        problems.append(str(e))
    else:
        planes = range(topo.planes)
        problems += sids.capacity_problems(
            topo.planes, max((len(topo.t1s(p)) for p in planes), default=0),
            max((len(topo.t0s(p)) for p in planes), default=0),
            max((len(s.host_ports) for s in topo.switches), default=0))
    return (None if problems else topo), problems


def replace_tls(topo: Topology, tls_of: Callable[[Switch], TlsConfig | None]) -> Topology:
    """The topology with each switch's TLS setting replaced by tls_of(switch)."""
    switches = tuple(dataclasses.replace(s, tls=tls_of(s)) for s in topo.switches)
    return dataclasses.replace(topo, switches=switches, _by_name={}, _t0=(), _t1=())


def with_tls(topo: Topology, options: TlsConfig | None) -> Topology:
    """The topology with the TLS options over every switch's own (field by field), and every TLS
    file it names checked (readable PEM of the right kind, key matching certificate): OpError naming
    the file otherwise, before any switch is contacted."""
    if options is not None:
        topo = replace_tls(topo, lambda s: override(s.tls, options))
    try:
        check_all([s.tls for s in topo.switches])
    except TlsError as e:
        raise OpError(str(e)) from None
    return topo
