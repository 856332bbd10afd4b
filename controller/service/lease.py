"""One controller at a time on a fabric whose record is a state file and whose switches elect no writer themselves
(the kernel data plane's namespaces): an exclusive lock on a file beside the state file, held for the controller's
whole run. A second controller waits as a standby and takes over when the first stops (the kernel frees the lock of
a process that died), so two never probe or write the same switches at once. P4Runtime switches need none: their
election ids make the lower controller a backup; an etcd store has its leadership (ha.py).

    lease = ControllerLease(state)
    if not lease.take():
        say(f"standby: {lease.holder()}")
        lease.wait(stop)
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

POLL_S = 0.2  # a standby tries the lock this often


def lease_path(state: Path) -> Path:
    return state.with_name(state.name + ".controller")


class ControllerLease:
    """The lock file's exclusive flock, taken without waiting (`take`) or by polling (`wait`); the holder's pid is
    written in the file for the one line a standby says."""

    def __init__(self, state: Path) -> None:
        self.path = lease_path(state)
        self._fd: int | None = None

    def take(self) -> bool:
        """True once this process holds the lease (OSError: the lock file cannot be opened)."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return True

    def holder(self) -> str:
        """Who holds it, for people: 'controller pid 1234 holds <path>'."""
        try:
            pid = self.path.read_text().strip()
        except OSError:
            pid = ""
        return f"controller pid {pid or '?'} holds {self.path}"

    def wait(self, stop: threading.Event) -> bool:
        """Poll until taken (True) or `stop` is set (False)."""
        while not self.take():
            if stop.wait(POLL_S):
                return False
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the flock goes with its last descriptor
            self._fd = None

    def __enter__(self) -> ControllerLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
