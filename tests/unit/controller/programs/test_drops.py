"""controller.programs.drops names exactly the drop reasons p4/include/defines.p4 defines."""

from __future__ import annotations

import re

from controller.programs.drops import DropReason
from tests.paths import REPO

DEFINES = REPO / "p4" / "include" / "defines.p4"


def test_drop_reasons_match_the_p4_defines() -> None:
    p4 = {name: int(value) for name, value in
          re.findall(r"const drop_reason_t DROP_(\w+)\s*=\s*(\d+);", DEFINES.read_text()) if name != "NONE"}
    assert p4 == {r.name: r.value for r in DropReason}
