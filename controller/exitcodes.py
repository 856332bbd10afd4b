"""fabricctl's exit codes and OpError, the one-line error that carries one."""

from __future__ import annotations

# Exit codes (documented in `fabricctl --help`).
OK, SWITCH_ERROR, BAD_INPUT, BAD_TOPOLOGY, PIPELINE, TOOLCHAIN = 0, 1, 2, 3, 4, 5


class OpError(Exception):
    """One line saying what is wrong, the exit code it means, and optional detail lines after it."""

    def __init__(self, message: str, code: int = BAD_INPUT, detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.detail = detail
