"""endpoint.unattended.timeline: the service's link, switch and reconcile events put on a scenario's clock."""

from __future__ import annotations

import json
from pathlib import Path

from endpoint.unattended import timeline


def test_timeline_names_the_link_or_switch_and_keeps_only_events_since(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    lines = [{"kind": "link_down", "link": ["p0-t0-0", "p0-t1-1"], "t_mono_ns": 1_000, "evidence": "old"},
             {"kind": "link_down", "link": ["p0-t0-0", "p0-t1-1"], "t_mono_ns": 3_000_000_000, "evidence": "dead"},
             {"kind": "switch_down", "switch": "p0-t1-1", "t_mono_ns": 3_500_000_000},
             {"kind": "carrier", "switch": "p0-t0-0", "port": 4, "up": False, "t_mono_ns": 2_500_000_000},
             {"kind": "mastership", "switch": "p0-t1-1", "role": "primary", "t_mono_ns": 2_600_000_000},
             {"kind": "deltas_written", "ms": 7.5, "t_mono_ns": 4_000_000_000}]
    events.write_text("".join(json.dumps(e) + "\n" for e in lines))
    got = timeline(events, since_ns=2_000_000_000, started_ns=1_000_000_000)
    assert got == [
        {"what": "controller (unattended): link_down p0-t0-0--p0-t1-1", "t_s": 2.0, "evidence": "dead"},
        {"what": "controller (unattended): switch_down p0-t1-1", "t_s": 2.5},
        {"what": "controller (unattended): carrier p0-t0-0", "t_s": 1.5},
        {"what": "controller (unattended): deltas_written", "t_s": 3.0, "ms": 7.5},
    ]
