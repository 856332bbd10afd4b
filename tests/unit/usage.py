"""Asserting the words of an `error:` line that are ours, not a library's.

Click frames usage errors ("Invalid value for", "Missing argument", "No such option", its range and
choice texts) and has reworded them between releases; the operating system words errno. A test names
what we decide: the option or argument, the value, our own message and our hint, in that order.
"""

from __future__ import annotations


def says(text: str, *parts: str) -> None:
    """`text` is one `error:` line (a trailing newline allowed) holding every part, in this order."""
    line = text[:-1] if text.endswith("\n") else text
    assert line.startswith("error: ") and "\n" not in line, text
    at = 0
    for part in parts:
        found = line.find(part, at)
        assert found >= 0, f"{part!r} not in {line[at:]!r} (the rest of {line!r})"
        at = found + len(part)
