"""YAML we read (topology, config): libyaml one switch record at a time (lean on large fabrics), and
strict: capped size, no duplicate keys, bounded nesting and aliases, no alias bomb."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.resolver import Resolver

from controller.model import limits
from controller.files.safefile import UnsafeFile, open_regular

try:
    from yaml import _yaml as _libyaml
    from yaml._yaml import CParser
except ImportError:  # PyYAML built without libyaml
    _libyaml = CParser = None  # type: ignore[assignment, misc]  # None when absent: every use checks CParser first

# libyaml 0.2.6 (PyYAML 6.0.4's wheels) refuses flow collections nested deeper than its own limit,
# 1000, while it scans ahead for a simple key, in its own words and before our composer sees depth
# MAX_YAML_DEPTH + 1. That look-ahead is bounded (a possible simple key goes stale after 1024
# characters or at the end of its line), so with libyaml's limit raised above that window our own
# depth check is the one that refuses, in our words, whichever PyYAML and libyaml are installed.
_LIBYAML_NEST_LEVEL = 1 << 16


class YamlError(yaml.YAMLError, ValueError):
    """A document that is not acceptable YAML for us; one line (with the line number when known)."""


def available() -> bool:
    """libyaml is there (else the pure-Python parser is used, with the same checks)."""
    return CParser is not None


class _Strict:
    """The checks every loader here makes while composing and constructing: nesting depth, alias
    count (both before the node is built) and duplicate mapping keys."""

    _depth = 0
    _aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(AliasEvent):  # type: ignore[attr-defined]  # a mixin: the parser's method
            self._aliases += 1
            if self._aliases > limits.MAX_YAML_ALIASES:
                raise YamlError(f"{_where(self.peek_event())}more than {limits.MAX_YAML_ALIASES} aliases "  # type: ignore[attr-defined]  # parser's
                                "(*name): refused (an alias bomb?)")
        self._depth += 1
        try:
            if self._depth > limits.MAX_YAML_DEPTH:
                raise YamlError(f"{_where(self.peek_event())}nested more than {limits.MAX_YAML_DEPTH} "  # type: ignore[attr-defined]  # parser's
                                "levels deep")
            return Composer.compose_node(self, parent, index)  # type: ignore[arg-type]  # self is a Composer once mixed in
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:  # the mapping's own keys; a '<<' merge may be overridden
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[attr-defined]  # the constructor's method
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: SafeConstructor reports it
                break
            if duplicate:
                raise ConstructorError(None, None, f"duplicate key {str(key)[:60]!r}", key_node.start_mark)
            seen.add(key)
        return SafeConstructor.construct_mapping(self, node, deep=deep)  # type: ignore[arg-type]  # a SafeConstructor once mixed in


if CParser is not None:
    class _Loader(_Strict, CParser, Composer, SafeConstructor, Resolver):
        """libyaml's events, PyYAML's composer (per node, not per document) and safe constructor."""

        def __init__(self, stream: Any) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

        def value(self) -> Any:
            return self.construct_document(self.compose_node(None, None))
else:
    class _Loader(_Strict, yaml.SafeLoader):  # type: ignore[no-redef]  # the other branch's _Loader, without libyaml
        """The pure-Python parser where PyYAML has no libyaml."""

        def value(self) -> Any:
            return self.construct_document(self.compose_node(None, None))


def _where(event: Any) -> str:
    mark = getattr(event, "start_mark", None) or getattr(event, "problem_mark", None) \
        or getattr(event, "context_mark", None)
    return f"line {mark.line + 1}: " if mark is not None else ""


def load(stream: Any) -> Any:
    """What yaml.safe_load gives for a topology document, read strictly (YamlError for what the
    module docstring refuses). Composing a whole document builds a node per scalar (440 MB for a
    1,152-switch file); here the items of the top-level `switches` list are composed and
    constructed one by one (80 MB, and faster than yaml.CSafeLoader)."""
    set_nest = getattr(_libyaml, "_set_max_nest_level", None)
    before = getattr(_libyaml, "_get_max_nest_level", lambda: None)()
    if set_nest is not None and before is not None and before < _LIBYAML_NEST_LEVEL:
        set_nest(_LIBYAML_NEST_LEVEL)
    try:
        loader = _Loader(stream)  # the pure-Python reader reads (and may refuse) its first chunk here
    except yaml.reader.ReaderError as e:
        raise _unreadable(e) from None
    try:
        doc = _document(loader)
    except YamlError:
        raise
    except yaml.reader.ReaderError as e:
        raise _unreadable(e) from None
    except yaml.YAMLError as e:
        parts = [p for p in (getattr(e, "context", None), getattr(e, "problem", None)) if p]
        problem = ", ".join(parts) or str(e).splitlines()[0]
        raise YamlError(f"not valid YAML: {_where(e)}{problem}") from None
    except RecursionError:
        raise YamlError("not valid YAML: nested too deeply") from None
    finally:
        loader.dispose()
        if set_nest is not None and before is not None and before < _LIBYAML_NEST_LEVEL:
            set_nest(before)
    if loader._aliases and _alias_blowup(doc) is not None:  # without aliases nothing can blow up
        raise YamlError(f"more than {limits.MAX_YAML_NODES} values once aliases are expanded: refused "
                        "(an alias bomb?)")
    return doc


def _unreadable(e: yaml.reader.ReaderError) -> YamlError:
    """Bytes that are not YAML text (invalid UTF-8, control characters), in our words from the error's
    fields, whichever parser and version found them."""
    return YamlError(f"not valid YAML: offset {e.position}: #x{e.character:02x} is not text YAML allows "
                     "(binary data?)")


def _document(ld: Any) -> Any:
    ld.get_event()  # StreamStart
    if ld.check_event(StreamEndEvent):
        return None
    ld.get_event()  # DocumentStart
    if not ld.check_event(MappingStartEvent):
        doc = ld.value()
    else:
        ld.get_event()
        doc = {}
        while not ld.check_event(MappingEndEvent):
            mark = ld.peek_event().start_mark
            key = ld.value()  # a top-level merge key '<<' fails here: no constructor for its tag
            try:
                duplicate = key in doc
            except TypeError:
                raise ConstructorError(None, None, "a mapping key that is not a scalar", mark) from None
            if duplicate:
                raise ConstructorError(None, None, f"duplicate key {str(key)[:60]!r}", mark)
            if key == "switches" and ld.check_event(SequenceStartEvent):
                ld.get_event()
                items = []
                while not ld.check_event(SequenceEndEvent):
                    items.append(ld.value())
                ld.get_event()
                doc[key] = items
            else:
                doc[key] = ld.value()
        ld.get_event()  # MappingEnd
    if ld.check_event(DocumentEndEvent):
        ld.get_event()
    if not ld.check_event(StreamEndEvent):
        raise ComposerError("expected a single document in the stream", None, "but found another document",
                            ld.peek_event().start_mark)
    return doc


def _alias_blowup(doc: Any) -> int | None:
    """The number of values the document holds with every alias expanded, when aliases make it
    larger than MAX_YAML_NODES and more than twice what was written (an alias bomb), else None.
    Computed once per shared node, so a bomb is measured without being expanded."""
    memo: dict[int, int] = {}
    written = 0

    def size(item: Any) -> int:
        nonlocal written
        if not isinstance(item, (dict, list)):
            return 1
        known = memo.get(id(item))
        if known is None:
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            written += 1 + sum(1 for c in children if not isinstance(c, (dict, list)))
            known = memo[id(item)] = 1 + sum(size(c) for c in children)
        return known

    expanded = size(doc)
    return expanded if expanded > limits.MAX_YAML_NODES and expanded > 2 * written else None


def loads(text: str) -> Any:
    """Parse one YAML document strictly (load); YamlError also for binary garbage (NUL bytes)."""
    if "\0" in text:
        raise YamlError("not YAML: the file holds NUL bytes (binary?)")
    return load(text)


def load_file(path: str | Path, limit: int, what: str) -> Any:
    """Parse a YAML file streamed from disk: a regular file of at most `limit` bytes
    (controller.files.safefile), UTF-8, strictly (load)."""
    with open_regular(path, limit, what) as raw:
        try:
            return load(raw)
        except UnicodeDecodeError as e:
            raise UnsafeFile(f"{what} {path} is not UTF-8 text (byte {e.start})") from None
