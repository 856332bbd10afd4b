"""Shared unit-test fixtures: the small hand-made P4Info the encoding tests run against."""

from __future__ import annotations


import pytest

from controller.runtime.p4info import P4Info
from tests.paths import UNIT_DATA

MINI = UNIT_DATA / "mini.p4info.txtpb"


@pytest.fixture
def p4info() -> P4Info:
    return P4Info.load(MINI)
