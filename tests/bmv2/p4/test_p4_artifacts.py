"""The committed compiler output equals a fresh p4c compile of p4/*.p4 (wherever p4c exists)."""

from __future__ import annotations

import pytest

from controller.programs.p4compile import compile_program
from controller.programs.toolchain import PROGRAMS, Artifacts, find_binary


@pytest.mark.parametrize("program", PROGRAMS)
def test_committed_artifacts_equal_a_fresh_compile(program, tmp_path):
    if find_binary("p4c") is None:
        pytest.skip("p4c not found on PATH (or $P4C / $P4_TOOLCHAIN_BIN)")
    fresh = compile_program(program, tmp_path).artifacts
    committed = Artifacts.of(program)
    assert fresh.p4info.read_text() == committed.p4info.read_text(), \
        f"p4/build/{program}.p4info.txtpb is stale: run `python3 -m controller.programs.p4compile`"
    assert fresh.bmv2_json.read_text() == committed.bmv2_json.read_text(), \
        f"p4/build/{program}.json is stale: run `python3 -m controller.programs.p4compile`"
