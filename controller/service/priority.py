"""CPU priority for the service's threads: probes and writes must not wait behind the data plane.

On Linux a nice value belongs to a thread, and threads (gRPC's included) inherit it from the thread
that starts them, so each service thread sets its own at start. Sharing cores with bmv2 switches and
RoCEv2 senders (the 2-core lab), an unprioritised controller takes up to 4 s to see probes that
cross the fabric in 20 ms, and judges healthy links failed; real controllers run their
liveness detection at raised priority for the same reason (BFD daemons, for one).
"""

from __future__ import annotations

import os
import threading

MIN_NICE, MAX_NICE = -20, 19


def check_nice(nice: int) -> int:
    """A nice value in Linux's range, or ValueError."""
    if not MIN_NICE <= nice <= MAX_NICE:
        raise ValueError(f"nice must be in {MIN_NICE}..{MAX_NICE}, got {nice}")
    return nice


def set_thread_nice(nice: int | None) -> str | None:
    """Give the calling thread (and the threads it starts later) `nice`; None leaves it. Returns why
    it could not (lowering nice needs root or CAP_SYS_NICE), or None."""
    if nice is None:
        return None
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), check_nice(nice))
    except (PermissionError, OSError) as e:
        return f"cannot set nice {nice} ({e.strerror or e}): running at nice {thread_nice()}"
    return None


def thread_nice() -> int:
    """The calling thread's nice value."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
