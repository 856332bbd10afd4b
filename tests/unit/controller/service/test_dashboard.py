"""dashboards/fabric.json: every query names only metrics the controller's exporter defines."""

from __future__ import annotations

from tests.paths import REPO

import json
import re

import pytest

from controller.service.metrics import Metrics

DASHBOARD = REPO / "dashboards" / "fabric.json"
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset",
            "inf", "nan"}
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
            "gauge": ("",), "summary": ("", "_sum", "_count", "_created"), "info": ("_info",)}


def exported() -> set[str]:
    """The series names the exporter serves: each family's name with the suffixes of its type."""
    names = set()
    for family in Metrics().registry.collect():
        names.update(family.name + s for s in SUFFIXES.get(family.type, ("",)))
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (not functions, keywords, labels or Grafana variables)."""
    text = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', "", expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\$\{?\w+\}?", "", text)
    found = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?", text):
        name, call = m.group(1), m.group(2)
        if not call and name.lower() not in KEYWORDS:
            found.add(name)
    return found


def queries(doc: dict) -> list[tuple[str, str]]:
    out = [(p["title"], t["expr"]) for p in doc["panels"] for t in p.get("targets", [])]
    for var in doc["templating"]["list"]:
        if var["type"] == "query":
            q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            out.append((f"variable {var['name']}", re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", q)))
    return out


def test_the_extractor_finds_metric_names_and_nothing_else():
    assert metric_names('histogram_quantile(0.99, sum by (le) (rate(fabric_reconcile_seconds_bucket{job=~"$job"}[5m])))') \
        == {"fabric_reconcile_seconds_bucket"}
    assert metric_names("count(fabric_link_up{a=\"b\"} == 0) or vector(0)") == {"fabric_link_up"}
    assert metric_names("sum(rate(a_total[1m])) / on (x) group_left (y) b") == {"a_total", "b"}


def test_every_panel_query_names_only_exported_metrics():
    doc = json.loads(DASHBOARD.read_text())
    names = exported()
    assert "fabric_probes_sent_total" in names and "fabric_probes_sent" not in names  # a counter's series
    assert "process_resident_memory_bytes" in names
    used: set[str] = set()
    for title, expr in queries(doc):
        found = metric_names(expr)
        assert found, f"panel {title!r}: no metric in {expr!r}"
        unknown = found - names
        assert not unknown, f"panel {title!r} queries {sorted(unknown)}, which the exporter does not define"
        used |= found
    # the panels an operator opens first
    for needed in ("fabric_failures", "fabric_probe_loss_ratio", "fabric_probe_delay_seconds", "fabric_path_packets",
                   "fabric_reconcile_seconds_bucket", "process_resident_memory_bytes", "fabric_link_up"):
        assert needed in used, f"no panel shows {needed}"


def test_panels_are_well_formed():
    doc = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for p in doc["panels"]:
        assert p["targets"] and p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]


@pytest.mark.parametrize("bad", ["rate(fabric_probes_sent[1m])", "fabric_nothing", "sum(fabric_reconcile_seconds)"])
def test_a_query_naming_no_exported_metric_is_caught(bad: str):
    assert metric_names(bad) - exported()
