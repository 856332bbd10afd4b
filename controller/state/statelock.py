"""One writer at a time on a failure-state file: an flock on a hidden lock file beside it."""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class StateLocked(RuntimeError):
    """Another process held the state file's lock for longer than we were willing to wait."""


def lock_path(state: Path) -> Path:
    """The lock file of a state file: `.<name>.lock` in the same directory (that of the symlink's
    target when the state file is a symlink, so every path to one file takes the same lock)."""
    if state.is_symlink():
        state = Path(os.path.realpath(state))
    return state.with_name(f".{state.name}.lock")


@contextmanager
def state_lock(state: str | Path, timeout: float = 10.0) -> Iterator[None]:
    """Hold the exclusive lock of `state` for the block (load-compute-save-apply under it).

    The lock is an flock on `.<name>.lock` beside the state file, so it is released by the kernel
    when its holder dies (SIGKILL included): a crashed fabricctl never leaves the file locked.
    StateLocked names the file and the time waited when another holder keeps it past `timeout`.
    """
    state = Path(state)
    path = lock_path(state)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout
        delay = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                raise StateLocked(f"state file {state} is locked by another fabricctl (waited {timeout:g} s; "
                                  f"lock {path})")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        yield
    finally:
        os.close(fd)
