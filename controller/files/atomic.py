"""Files written whole or not at all (the safe writer lives in controller.files.safefile)."""

from __future__ import annotations

from controller.files.safefile import open_atomic, write_atomic

__all__ = ["open_atomic", "write_atomic"]
