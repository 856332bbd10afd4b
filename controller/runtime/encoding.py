"""The plan encoded for a P4Info: each switch's entities in canonical form, checked before any switch is contacted."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from controller.exitcodes import PIPELINE, OpError
from controller.plan.entries import Entity
from controller.runtime.codec import canonical
from controller.runtime.p4info import P4Info
from controller.runtime.p4rt import describe


@dataclass
class Encoded:
    """The canonical entities each switch should hold, and the plan form of each (for display)."""

    desired: dict[str, list[Entity]]
    planned: dict[Entity, Entity]

    def shown(self, entity: Entity) -> Entity:
        return self.planned.get(entity, entity)


def encode(plan: Mapping[str, Sequence[Entity]], names: Iterable[str], p4info: P4Info, where: str) -> Encoded:
    """Every named switch's entities in canonical form; OpError (PIPELINE) on the first that the
    P4Info cannot hold. Entities shared between switches are checked once."""
    memo: dict[Entity, Entity] = {}
    desired: dict[str, list[Entity]] = {}
    for name in names:
        out: list[Entity] = []
        for e in plan[name]:
            c = memo.get(e)
            if c is None:
                try:
                    c = memo[e] = canonical(e, p4info)
                except (ValueError, LookupError, TypeError) as err:
                    raise OpError(f"the plan does not fit {where}: {name}: {describe(e)}: {err}", PIPELINE) from None
            out.append(c)
        desired[name] = out
    return Encoded(desired, {c: e for e, c in memo.items()})
