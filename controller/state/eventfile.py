"""Reading a controller's JSON-lines events file by byte offset: the last N whole lines, and what came after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

EVENTS_NAME = "fabric-events.jsonl"  # beside the state file, unless `fabricctl run --events` names another
Cursored = list[tuple[int, dict[str, Any]]]  # events, each with the cursor after it (here: the byte offset)


def backlog_offset(path: Path, lines: int) -> int:
    """The byte offset where the last `lines` whole lines of a file begin (0 for a short or absent file; a
    torn last line, not ended yet, is not one of them)."""
    try:
        with open(path, "rb") as f:
            pos, found = f.seek(0, 2), 0
            while pos > 0:
                step = min(65536, pos)
                pos -= step
                f.seek(pos)
                chunk = f.read(step)
                for i in range(len(chunk) - 1, -1, -1):
                    if chunk[i] == 0x0A:  # the first ends the last whole line; the (lines+1)-th precedes the first wanted
                        found += 1
                        if found == lines + 1:
                            return pos + i + 1
            return 0
    except OSError:
        return 0


def new_events(path: Path, offset: int, limit: int = 1 << 20) -> tuple[Cursored, int]:
    """The whole JSON lines of a file from `offset` (each with the offset after it), and the next offset.
    A torn last line waits; a file that shrank (a new one) is read from its start."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size < offset:
                offset = 0
            f.seek(offset)
            chunk = f.read(min(size - offset, limit))
    except OSError:
        return [], offset
    out, pos = [], offset
    for line in chunk.split(b"\n")[:-1]:  # the part after the last newline is not whole yet
        pos += len(line) + 1
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append((pos, doc))
    return out, pos
