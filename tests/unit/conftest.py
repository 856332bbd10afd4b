"""Shared unit-test fixtures: the small hand-made P4Info the encoding tests run against."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.runtime.p4info import P4Info

MINI = Path(__file__).parent / "data" / "mini.p4info.txtpb"


@pytest.fixture
def p4info() -> P4Info:
    return P4Info.load(MINI)
