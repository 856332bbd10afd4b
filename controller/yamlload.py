"""Topology YAML through libyaml, one switch record composed at a time (lean on large fabrics)."""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.events import (
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.resolver import Resolver

try:
    from yaml._yaml import CParser
except ImportError:  # PyYAML built without libyaml
    CParser = None


def available() -> bool:
    """libyaml is there (else load() is yaml.safe_load)."""
    return CParser is not None


def load(stream: Any) -> Any:
    """What yaml.safe_load gives for a topology document, through libyaml's parser. Composing a
    whole document builds a node per scalar (440 MB for a 1,152-switch file); here the items
    of the top-level `switches` list are composed and constructed one by one (80 MB, and
    faster than yaml.CSafeLoader)."""
    if CParser is None:
        return yaml.safe_load(stream)
    loader = _Loader(stream)
    try:
        return _document(loader)
    finally:
        loader.dispose()


class _Loader(CParser, Composer, SafeConstructor, Resolver):  # type: ignore[misc, valid-type]
    """libyaml's events, PyYAML's composer (per node, not per document) and safe constructor."""

    compose_node = Composer.compose_node  # not CParser's whole-document C composer

    def __init__(self, stream: Any) -> None:
        CParser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def value(self) -> Any:
        return self.construct_document(self.compose_node(None, None))


def _document(ld: _Loader) -> Any:
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
            key = ld.value()  # a top-level merge key '<<' fails here: no constructor for its tag
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
