"""Test tiers: tests under tests/unit are `unit`, tests/bmv2 `bmv2`, tests/mininet `mininet`."""

from __future__ import annotations

from pathlib import Path

import pytest

_TIERS = ("unit", "bmv2", "mininet")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for tier in _TIERS:
            if tier in parts:
                item.add_marker(getattr(pytest.mark, tier))
