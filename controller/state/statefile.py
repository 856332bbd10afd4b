"""The failure-state file: the record of failures (controller.model.failures' document) in a file.

Reads are capped and of regular files only; writes go through safefile.write_atomic (symlinks written
through, mode kept, no temp file left) and never replace a file that is not a state file. Errors are
StateFileError, one line naming the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from controller.model.failures import OPERATOR, Failure, Origin, StateFileError, origins_from_text, to_text
from controller.model import limits
from controller.files.safefile import UnsafeFile, read_text, write_atomic


def load_state(path: str | Path) -> frozenset[Failure]:
    """The failure set in a state file; an absent file is no failure. StateFileError (naming the file)
    for a file that is not a state file, too large, not regular, or unreadable."""
    return frozenset(load_origins(path))


def load_origins(path: str | Path) -> dict[Failure, Origin]:
    """Each recorded failure with who recorded it, operator or detector (as `load_state`, whose errors it
    raises)."""
    try:
        text = read_text(path, limits.MAX_STATE_BYTES, "state file")
    except FileNotFoundError:
        return {}
    except UnsafeFile as e:
        raise StateFileError(str(e)) from None
    except OSError as e:
        raise StateFileError(f"cannot read state file {path}: {e.strerror or e}") from None
    try:
        return origins_from_text(text)
    except StateFileError as e:
        raise StateFileError(f"state file {path}: {e}") from None


def save_state(path: str | Path, failures: Iterable[Failure], origins: Mapping[Failure, Origin] | None = None) -> None:
    """Write the failure set (sorted: equal sets give equal files); refuses to replace a file that is
    not a state file (StateFileError) or is not a regular file. A failure's origin is the one given
    in `origins`, else the one the file records now (a failure kept keeps its origin), else the
    operator's (a one-shot command records what it adds as the operator's). Callers hold the state lock."""
    failures = set(failures)
    given = dict(origins or {})
    if any(f not in given for f in failures):
        try:
            now = load_origins(path)
        except StateFileError:
            now = {}  # not a state file: write_atomic below refuses it with its own line
        given = {f: given.get(f, now.get(f, OPERATOR)) for f in failures}
    text = to_text(failures, given)
    try:
        write_atomic(path, text, what="state file", ours=load_state)
    except UnsafeFile as e:
        raise StateFileError(str(e)) from None
    except OSError as e:
        raise StateFileError(f"cannot write state file {path}: {e.strerror or e}") from None
