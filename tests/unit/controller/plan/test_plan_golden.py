"""The planner's output on fixed designs, options and failure sets equals the committed plans.

The files in data/golden_plans/ were written by the planner before its speed-ups (commit
"srv6_spray headend: derive ...", the entry layout of docs/sid-plan.md); a faster planner must
give exactly the same entities. Regenerate only for an intended layout change:
`python -m tests.unit.controller.plan.test_plan_golden` (and say why in the commit).
"""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from controller.failover import with_failures
from controller.model.failures import Failure, HostPortDown, LinkDown, SwitchDown
from controller.plan.fabricplan import Plan, plan
from controller.routes import Fabric, Options
from controller.plan.p4names import EECMP, QP, FLOW
from controller.plan.options import HostPin, Pin
from controller.model.topology import build, load
from tests.paths import REPO, UNIT_DATA

pytestmark = pytest.mark.unit

GOLDEN = UNIT_DATA / "golden_plans"
LAB = REPO / "examples" / "two_plane_lab.yaml"
MIXED: list[Failure] = [LinkDown("p0-t0-1", "p0-t1-0"), LinkDown("p0-t0-2", "p0-t1-1"), SwitchDown("p1-t1-2"),
                        HostPortDown("p0-t0-3", 2), SwitchDown("p1-t0-4")]
SPRAY_OPTS = Options(mode=QP, dest_modes=((0, 2, FLOW), (0, 5, FLOW)),
                     pins=(Pin(0, 0, 3, 1, 0x11, 2), Pin(0, 1, 2, 0, 0x12, 0)))
ECMP_OPTS = Options(program=EECMP, dest_modes=((1, 1, QP),), host_pins=(HostPin(0, 2, 1, 7),))


def _cases() -> dict[str, Fabric]:
    small, wide = build(2, 3, 5, 2), build(1, 4, 6, 3)
    plane_down = [SwitchDown(f"p0-t1-{j}") for j in range(2)] + [LinkDown("p1-t0-6", "p1-t1-1")]
    return {
        "spray_healthy": Fabric(small),
        "spray_mixed": with_failures(Fabric(small), MIXED),
        "spray_options": with_failures(Fabric(wide, options=SPRAY_OPTS),
                                       [LinkDown("p0-t0-3", "p0-t1-2"), LinkDown("p0-t0-0", "p0-t1-0"),
                                        LinkDown("p0-t0-3", "p0-t1-0"), SwitchDown("p0-t0-5"), HostPortDown("p0-t0-2", 1)]),
        "spray_plane_down": with_failures(Fabric(build(2, 2, 7, 1)), plane_down),
        "ecmp_mixed": with_failures(Fabric(small, options=ECMP_OPTS), MIXED),
        "lab_healthy": Fabric(load(LAB)),
    }


@pytest.mark.parametrize("name", sorted(_cases()))
def test_plan_equals_the_golden_plan(name: str) -> None:
    golden = Plan.from_json((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    got = plan(_cases()[name])
    assert list(got) == list(golden)
    for switch in golden:
        assert Counter(got[switch]) == Counter(golden[switch]), switch


if __name__ == "__main__":
    for name, fabric in _cases().items():
        (GOLDEN / f"{name}.json").write_text(plan(fabric).to_json(indent=0) + "\n", encoding="utf-8")
    sys.exit(0)
