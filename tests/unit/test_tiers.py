"""A test's tier is the folder under tests/ it sits in, whatever folders hold the checkout."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import TESTS, tier_of


def test_a_checkout_under_a_folder_named_like_a_tier_keeps_each_test_in_its_own(tmp_path: Path):
    tests = tmp_path / "unit" / "srv6-fabric" / "tests"  # e.g. /home/unit/srv6-fabric
    for tier in ("bmv2", "mininet", "etcd", "kernel", "unit"):
        (tests / tier / "controller").mkdir(parents=True)
        test = tests / tier / "controller" / "test_x.py"
        test.touch()
        assert tier_of(test, tests) == tier
    (tests / "kernel" / "mininet_labs").mkdir()
    assert tier_of(tests / "kernel" / "mininet_labs" / "test_y.py", tests) == "kernel"
    assert tier_of(tests / "conftest.py", tests) is None  # not in a tier's folder
    assert tier_of(tmp_path / "unit" / "test_z.py", tests) is None  # outside tests/


def test_this_file_is_a_unit_test():
    assert tier_of(Path(__file__)) == "unit"
    assert tier_of(TESTS / "bmv2" / "p4" / "test_watch_port.py") == "bmv2"
