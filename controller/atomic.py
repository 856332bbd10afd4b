"""Files written whole or not at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


def write_atomic(path: str | Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it over `path`: a reader sees the
    old file or the new one, never part of it. On an error the temporary file is removed."""
    with open_atomic(path) as fh:
        fh.write(text)


@contextlib.contextmanager
def open_atomic(path: str | Path) -> Iterator[TextIO]:
    """A text file to write in pieces (streaming) that replaces `path` only when the block ends
    without an error; otherwise the temporary file is removed and `path` is left as it was."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
