"""Test tiers: tests under tests/unit are `unit`, tests/bmv2 `bmv2`, tests/mininet `mininet`, tests/etcd `etcd`, tests/kernel `kernel`.

SRV6_FABRIC_REQUIRE_TIERS=bmv2,mininet (set by .ci/run where the P4 toolchain is at hand) turns a
skip in those tiers into a failure, so a missing binary or privilege cannot pass CI silently.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_TIERS = ("unit", "bmv2", "mininet", "etcd", "kernel")


def _required() -> set[str]:
    return {t.strip() for t in os.environ.get("SRV6_FABRIC_REQUIRE_TIERS", "").split(",") if t.strip()}


TESTS = Path(__file__).resolve().parent


def tier_of(path: Path, tests: Path = TESTS) -> str | None:
    """The tier of a test file: the first folder under `tests` (a folder named like a tier above the
    checkout, e.g. /home/unit/srv6-fabric, is none of its business); None outside `tests`."""
    try:
        top = Path(path).resolve().relative_to(tests).parts[0]
    except (ValueError, IndexError):
        return None
    return top if top in _TIERS else None


def _tier(item: pytest.Item) -> str | None:
    return tier_of(Path(str(item.fspath)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = _tier(item)
        if tier is not None:
            item.add_marker(getattr(pytest.mark, tier))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    tier = _tier(item)
    if report.skipped and tier in _required() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"the {tier} tier is required here (SRV6_FABRIC_REQUIRE_TIERS) but skipped: {reason}"
