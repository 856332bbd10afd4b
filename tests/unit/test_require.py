"""A skip for a missing tool is a failure where the environment says the tool is there."""

from __future__ import annotations

import pytest

from tests.require import need, needs, required_tools


def test_a_missing_tool_skips_with_its_reason_unless_required(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SRV6_FABRIC_REQUIRE_TOOLS", raising=False)
    need("gcc", True, "unused")  # there: nothing happens
    with pytest.raises(pytest.skip.Exception, match="^gcc not found$"):
        need("gcc", False, "gcc not found")
    monkeypatch.setenv("SRV6_FABRIC_REQUIRE_TOOLS", "openssl, gcc")
    with pytest.raises(pytest.fail.Exception) as e:
        need("gcc", False, "gcc not found")
    assert str(e.value) == "gcc is required here (SRV6_FABRIC_REQUIRE_TOOLS) but missing: gcc not found"
    with pytest.raises(pytest.skip.Exception):
        need("chromium", False, "chromium not found")  # not required here


def test_the_decorator_runs_the_test_where_the_tool_is_and_fails_it_where_required(monkeypatch: pytest.MonkeyPatch):
    ran = []
    assert needs("libyaml", True, "no libyaml")(lambda: ran.append(1)) is not None
    needs("libyaml", True, "no libyaml")(lambda: ran.append(1))()
    assert ran == [1]
    monkeypatch.setenv("SRV6_FABRIC_REQUIRE_TOOLS", "libyaml")
    with pytest.raises(pytest.fail.Exception, match="libyaml is required here"):
        needs("libyaml", False, "no libyaml")(lambda: ran.append(2))()
    assert ran == [1]


def test_an_unknown_tool_name_is_refused_not_ignored():
    with pytest.raises(ValueError, match="unknown chromum"):
        required_tools({"SRV6_FABRIC_REQUIRE_TOOLS": "chromum"})
    assert required_tools({"SRV6_FABRIC_REQUIRE_TOOLS": " p4-build ,openssl"}) == {"p4-build", "openssl"}
