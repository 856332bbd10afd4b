"""Prometheus metrics of the running controller (prometheus_client, its own registry and HTTP server)."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, start_http_server

from controller.plan.entries import CounterValue
from controller.service.paths import PathLabel

DEFINES = Path(__file__).resolve().parents[2] / "p4" / "include" / "defines.p4"
_DROP = re.compile(r"const\s+drop_reason_t\s+DROP_(\w+)\s*=\s*(\d+)\s*;")


def drop_reason_names(defines: Path = DEFINES) -> dict[int, str]:
    """Drop reason index -> name (lower case, without DROP_) as the P4 source defines them."""
    try:
        text = defines.read_text(encoding="utf-8")
    except OSError:
        return {}
    return {int(n): name.lower() for name, n in _DROP.findall(text)}


class Metrics:
    """Every metric the controller exports; `serve(port)` starts the HTTP endpoint (0: none)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)  # process_resident_memory_bytes, process_cpu_seconds_total, ... (Linux /proc)
        self.port_rx = Gauge("fabric_port_rx_packets", "Packets received per switch port (bmv2 counter)",
                             ["switch", "port"], registry=r)
        self.port_tx = Gauge("fabric_port_tx_packets", "Packets sent per switch port (bmv2 counter)",
                             ["switch", "port"], registry=r)
        self.drops = Gauge("fabric_drops", "Packets dropped per switch, by drop reason", ["switch", "reason"], registry=r)
        self.probes_sent = Counter("fabric_probes_sent", "Link probes sent", ["link", "direction"], registry=r)
        self.probes_lost = Counter("fabric_probes_lost", "Link probes lost (not back within the probe timeout)",
                                   ["link", "direction"], registry=r)
        self.probe_loss = Gauge("fabric_probe_loss_ratio", "Probe loss over the detector's window",
                                ["link", "direction"], registry=r)
        self.probe_delay = Gauge("fabric_probe_delay_seconds", "Last probe delay, packet-out to packet-in",
                                 ["link", "direction"], registry=r)
        self.link_up = Gauge("fabric_link_up", "1 while the detectors hold the link (T0--T1) or host port (T0:port) up",
                             ["link"], registry=r)
        self.failures = Gauge("fabric_failures", "Failures recorded in the state file", registry=r)
        self.link_changes = Counter("fabric_link_changes", "Links declared down or up by the probes",
                                    ["change"], registry=r)
        self.reconcile = Histogram("fabric_reconcile_seconds", "Time to write one switch's delta or full reconcile",
                                   ["switch"], buckets=(.002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5), registry=r)
        self.primary = Gauge("fabric_primary", "1 where this controller is primary, 0 where backup or down",
                             ["switch"], registry=r)
        self.reconnects = Counter("fabric_reconnects", "P4Runtime streams that broke and were reopened",
                                  ["switch"], registry=r)
        self.probe_timeout = Gauge("fabric_probe_timeout_seconds", "The probe timeout in use (floor --probe-timeout, "
                                   "raised by recent probe delays)", registry=r)
        self.probes_late = Gauge("fabric_probes_late", "Probes that arrived after they were judged lost", registry=r)
        self.path_packets = Gauge("fabric_path_packets", "Packets a source leaf's headend sent on each path "
                                  "(srv6_spray path_packets, by the path's plane, spine and segment list)",
                                  ["switch", "plane", "spine", "segments"], registry=r)
        self.probe_io_errors = Gauge("fabric_probe_io_errors", "Probes not sent (send) and reads of arrivals that "
                                     "failed (read), since start", ["what"], registry=r)
        self.counter_errors = Counter("fabric_counter_read_errors", "Counter reads of a switch that failed or went "
                                      "unanswered (its counter metrics are then left as last read)", ["switch"],
                                      registry=r)
        self.packet_io = Gauge("fabric_probe_packets", "Probe packets through P4Runtime since start (out, in; refused: not sent, the stream's backlog full)",
                               ["way"], registry=r)
        self.denylist_links = Gauge("fabric_denylist_links", "Directed links in the recorded denylist (as the leader "
                                    "last read it to push to the endpoints)", registry=r)
        self.denylist_pushes = Counter("fabric_denylist_pushes", "Pushes of the denylist to a host's endpoint, by "
                                       "outcome (told, not_told)", ["host", "outcome"], registry=r)

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        if port:
            start_http_server(port, addr=addr, registry=self.registry)

    def set_counters(self, switch: str, rx: list[CounterValue], tx: list[CounterValue], drops: list[CounterValue],
                     names: dict[int, str]) -> None:
        """Per-port rx/tx (ports that saw a packet) and drops by reason name, from counter reads."""
        for v in rx:
            if v.packets:
                self.port_rx.labels(switch, str(v.index)).set(v.packets)
        for v in tx:
            if v.packets:
                self.port_tx.labels(switch, str(v.index)).set(v.packets)
        for v in drops:
            if v.index and (v.packets or v.index in names):
                self.drops.labels(switch, names.get(v.index, f"reason_{v.index}")).set(v.packets)

    def set_paths(self, switch: str, cells: list[CounterValue], labels: dict[int, PathLabel]) -> None:
        """Each labelled path's packets (every labelled cell read, 0 included: a path never used shows)."""
        for v in cells:
            label = labels.get(v.index)
            if label is not None:
                self.path_packets.labels(switch, str(label.plane), label.spine, label.segments).set(v.packets)
