"""P4Info as an index: tables, actions, profiles, counters and packet metadata by name, alias or id."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Iterable, Protocol, TypeVar

from google.protobuf import text_format

from controller.runtime.proto import p4info_pb2


class UnknownNameError(LookupError):
    """A name (or id) that the P4Info does not define; the message lists close matches."""

    def __init__(self, kind: str, name: str | int, known: Iterable[str]) -> None:
        close = difflib.get_close_matches(str(name), list(known), n=4, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        super().__init__(f"unknown {kind} {name!r} in P4Info{hint}")
        self.kind = kind
        self.name = name
        self.close_matches = close


F = TypeVar("F", "MatchFieldInfo", "ParamInfo")


def _find(items: tuple[F, ...], attr: str, wanted: str | int, kind: str) -> F:
    """The item whose `attr` is `wanted`, else UnknownNameError with the close names."""
    for item in items:
        if getattr(item, attr) == wanted:
            return item
    raise UnknownNameError(kind, wanted, [i.name for i in items] if attr == "name" else [])


class P4InfoError(ValueError):
    """A P4Info file that does not parse (one line)."""


@dataclass(frozen=True, slots=True)
class MatchFieldInfo:
    """One match field of a table; match_type is the P4Info enum name (EXACT, LPM, TERNARY, ...)."""

    id: int
    name: str
    bitwidth: int
    match_type: str


@dataclass(frozen=True, slots=True)
class ParamInfo:
    """One action parameter or one packet-metadata field."""

    id: int
    name: str
    bitwidth: int


@dataclass(frozen=True, slots=True)
class ActionInfo:
    """An action and its parameters in P4Info order."""

    id: int
    name: str
    alias: str
    params: tuple[ParamInfo, ...]

    def param(self, name: str) -> ParamInfo:
        return _find(self.params, "name", name, f"parameter of action {self.name}")


@dataclass(frozen=True, slots=True)
class TableInfo:
    """A table: match fields in P4Info order, allowed action ids, action profile (0 if direct)."""

    id: int
    name: str
    alias: str
    match_fields: tuple[MatchFieldInfo, ...]
    action_ids: tuple[int, ...]
    implementation_id: int
    size: int
    const_default_action_id: int = 0
    is_const: bool = False
    default_only_ids: tuple[int, ...] = ()
    table_only_ids: tuple[int, ...] = ()

    def match_field(self, name: str) -> MatchFieldInfo:
        return _find(self.match_fields, "name", name, f"match field of table {self.name}")

    def match_field_by_id(self, field_id: int) -> MatchFieldInfo:
        return _find(self.match_fields, "id", field_id, f"match field id of table {self.name}")

    @property
    def needs_priority(self) -> bool:
        """Tables with ternary, range or optional fields order their entries by priority."""
        return any(f.match_type in ("TERNARY", "RANGE", "OPTIONAL") for f in self.match_fields)


@dataclass(frozen=True, slots=True)
class ActionProfileInfo:
    """An action profile, or an action selector when with_selector is set."""

    id: int
    name: str
    alias: str
    with_selector: bool
    table_ids: tuple[int, ...]
    size: int
    max_group_size: int


@dataclass(frozen=True, slots=True)
class CounterInfo:
    """An indirect counter array; unit is BYTES, PACKETS or BOTH."""

    id: int
    name: str
    alias: str
    size: int
    unit: str


@dataclass(frozen=True, slots=True)
class PacketMetadataInfo:
    """Controller packet metadata header (packet_in / packet_out) and its fields."""

    id: int
    name: str
    alias: str
    fields: tuple[ParamInfo, ...]

    def field(self, name: str) -> ParamInfo:
        return _find(self.fields, "name", name, f"field of {self.name}")


T = TypeVar("T", TableInfo, ActionInfo, ActionProfileInfo, CounterInfo, PacketMetadataInfo)


class _Index(Generic[T]):
    """Objects of one kind by full name, alias and id."""

    def __init__(self, kind: str, items: Iterable[T]) -> None:
        self.kind = kind
        self.items: tuple[T, ...] = tuple(items)
        self._by_id: dict[int, T] = {i.id: i for i in self.items}
        self._by_name: dict[str, T] = {i.alias: i for i in self.items if i.alias}
        self._by_name.update({i.name: i for i in self.items})

    def __call__(self, name: str) -> T:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._by_name) from None

    def by_id(self, ident: int) -> T:
        try:
            return self._by_id[ident]
        except KeyError:
            raise UnknownNameError(f"{self.kind} id", ident, []) from None


class _Described(Protocol):
    """A P4Info message with a preamble: table, action, action profile, counter, controller packet metadata."""

    @property
    def preamble(self) -> p4info_pb2.Preamble: ...


class _Param(Protocol):
    """An action parameter or a packet metadata field: both have an id, a name and a width."""

    @property
    def id(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def bitwidth(self) -> int: ...


def _preamble(msg: _Described) -> tuple[int, str, str]:
    return msg.preamble.id, msg.preamble.name, msg.preamble.alias


def _params(params: Iterable[_Param]) -> tuple[ParamInfo, ...]:
    return tuple(ParamInfo(p.id, p.name, p.bitwidth) for p in params)


class P4Info:
    """An indexed P4Info; look objects up with .table(name), .action(name), ... (full name or alias)."""

    def __init__(self, message: p4info_pb2.P4Info) -> None:
        self.message = message
        mt = p4info_pb2.MatchField.MatchType.Name
        unit = p4info_pb2.CounterSpec.Unit.Name
        self.table: _Index[TableInfo] = _Index("table", (
            TableInfo(
                *_preamble(t),
                match_fields=tuple(MatchFieldInfo(f.id, f.name, f.bitwidth, mt(f.match_type)) for f in t.match_fields),
                action_ids=tuple(a.id for a in t.action_refs),
                implementation_id=t.implementation_id,
                size=t.size,
                const_default_action_id=t.const_default_action_id,
                is_const=t.is_const_table,
                default_only_ids=tuple(a.id for a in t.action_refs if a.scope == p4info_pb2.ActionRef.DEFAULT_ONLY),
                table_only_ids=tuple(a.id for a in t.action_refs if a.scope == p4info_pb2.ActionRef.TABLE_ONLY),
            )
            for t in message.tables
        ))
        self.action: _Index[ActionInfo] = _Index(
            "action", (ActionInfo(*_preamble(a), params=_params(a.params)) for a in message.actions)
        )
        self.action_profile: _Index[ActionProfileInfo] = _Index("action profile", (
            ActionProfileInfo(*_preamble(p), p.with_selector, tuple(p.table_ids), p.size, p.max_group_size)
            for p in message.action_profiles
        ))
        self.counter: _Index[CounterInfo] = _Index(
            "counter", (CounterInfo(*_preamble(c), c.size, unit(c.spec.unit)) for c in message.counters)
        )
        self.packet_metadata: _Index[PacketMetadataInfo] = _Index("controller packet metadata", (
            PacketMetadataInfo(*_preamble(m), fields=_params(m.metadata))
            for m in message.controller_packet_metadata
        ))

    @classmethod
    def from_text(cls, text: str) -> "P4Info":
        """Parse P4Info text; P4InfoError (one line) if it is not a P4Info."""
        try:
            return cls(text_format.Parse(text, p4info_pb2.P4Info()))
        except (text_format.ParseError, RecursionError, ValueError, KeyError) as e:
            raise P4InfoError(f"not a P4Info: {' '.join(str(e).split())[:200] or type(e).__name__}") from None

    @classmethod
    def load(cls, path: str | Path) -> "P4Info":
        """Read a P4Info text file (p4c --p4runtime-files x.p4info.txtpb): a regular file of at most
        limits.MAX_P4INFO_BYTES; P4InfoError naming the file if it does not parse, OSError if unreadable."""
        from controller.model import limits
        from controller.files.safefile import read_text

        text = read_text(path, limits.MAX_P4INFO_BYTES, "P4Info")
        try:
            return cls.from_text(text)
        except P4InfoError as e:
            raise P4InfoError(f"{path}: {e}") from None

    @property
    def tables(self) -> tuple[TableInfo, ...]:
        return self.table.items

    @property
    def actions(self) -> tuple[ActionInfo, ...]:
        return self.action.items

    @property
    def action_profiles(self) -> tuple[ActionProfileInfo, ...]:
        return self.action_profile.items

    @property
    def counters(self) -> tuple[CounterInfo, ...]:
        return self.counter.items

    def table_action(self, table: TableInfo, action: str, default: bool = False) -> ActionInfo:
        """The action named for an entry (or the default entry) of `table`, checked against its action refs."""
        info = self.action(action)
        excluded = table.table_only_ids if default else table.default_only_ids
        allowed = [i for i in table.action_ids if i not in excluded]
        if info.id not in allowed:
            where = "the default action" if default else "an entry action"
            names = ", ".join(self.action.by_id(i).name for i in allowed)
            raise ValueError(f"action {info.name} is not {where} of table {table.name}; allowed: {names}")
        if default and table.const_default_action_id:
            raise ValueError(f"table {table.name} has a const default action; its default entry cannot change")
        return info

    def profile_of(self, table: TableInfo) -> ActionProfileInfo | None:
        """The action profile/selector implementing `table`, or None for direct actions."""
        return self.action_profile.by_id(table.implementation_id) if table.implementation_id else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, P4Info) and not pipeline_differences(self, other)

    __hash__ = None  # type: ignore[assignment]  # unhashable: equal P4Infos compare by content


def _signature(p4info: P4Info) -> dict[str, object]:
    """What defines the pipeline's control-plane interface (ids, names, widths), without docs or annotations."""
    return {
        "table": {t.id: (t.name, t.match_fields, tuple(sorted(t.action_ids)), t.implementation_id, t.size,
                         t.const_default_action_id, t.is_const) for t in p4info.tables},
        "action": {a.id: (a.name, a.params) for a in p4info.actions},
        "action profile": {p.id: (p.name, p.with_selector, tuple(sorted(p.table_ids)), p.size, p.max_group_size)
                           for p in p4info.action_profiles},
        "counter": {c.id: (c.name, c.size, c.unit) for c in p4info.counters},
        "packet metadata": {m.id: (m.name, m.fields) for m in p4info.packet_metadata.items},
    }


def pipeline_differences(ours: P4Info, theirs: P4Info) -> list[str]:
    """Human-readable differences between two P4Infos' tables, actions, profiles, counters; [] if they match."""
    differences: list[str] = []
    a, b = _signature(ours), _signature(theirs)
    for kind in a:
        mine, other = a[kind], b[kind]
        assert isinstance(mine, dict) and isinstance(other, dict)
        for ident in sorted(mine.keys() | other.keys()):
            if ident not in other:
                differences.append(f"{kind} {mine[ident][0]} (id {ident:#x}) missing on the other side")
            elif ident not in mine:
                differences.append(f"{kind} {other[ident][0]} (id {ident:#x}) only on the other side")
            elif mine[ident] != other[ident]:
                differences.append(f"{kind} {mine[ident][0]} (id {ident:#x}) differs")
    return differences


def same_pipeline(ours: P4Info, theirs: P4Info) -> bool:
    """True when both P4Infos define the same tables, actions, profiles, counters and ids."""
    return not pipeline_differences(ours, theirs)
