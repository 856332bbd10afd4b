"""Skips that CI enforces: a test that needs a tool skips naming it, except where the environment says
the tool is there (SRV6_FABRIC_REQUIRE_TOOLS=chromium,openssl,..., set by .ci/run for what it installs):
there the same test fails, so a lost binary cannot pass CI as a skip.

Tool names: chromium (and chromedriver, selenium), openssl, gcc, binutils (nm, readelf), libyaml (PyYAML's
C loader), mininet (its Python package and mnexec), p4-build (the compiled P4 artifacts in p4/build), p4-toolchain (p4c, simple_switch_grpc).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

TOOLS = ("chromium", "openssl", "gcc", "binutils", "libyaml", "mininet", "p4-build", "p4-toolchain")
F = TypeVar("F", bound=Callable[..., Any])


def required_tools(environ: dict[str, str] | None = None) -> set[str]:
    """The tools the environment says are there (unknown names are an error: a typo would enforce nothing)."""
    text = (os.environ if environ is None else environ).get("SRV6_FABRIC_REQUIRE_TOOLS", "")
    names = {t.strip() for t in text.split(",") if t.strip()}
    unknown = names - set(TOOLS)
    if unknown:
        raise ValueError(f"SRV6_FABRIC_REQUIRE_TOOLS: unknown {', '.join(sorted(unknown))} (known: {', '.join(TOOLS)})")
    return names


def need(tool: str, present: bool, why: str) -> None:
    """In a test or fixture: go on if `present`; else skip with `why`, or fail where `tool` is required."""
    assert tool in TOOLS, tool
    if present:
        return
    if tool in required_tools():
        pytest.fail(f"{tool} is required here (SRV6_FABRIC_REQUIRE_TOOLS) but missing: {why}", pytrace=False)
    pytest.skip(why)


def needs(tool: str, present: bool, why: str) -> Callable[[F], F]:
    """The decorator form of need()."""
    def decorate(test: F) -> F:
        if present:
            return test

        @functools.wraps(test)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            need(tool, present, why)
            return test(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
