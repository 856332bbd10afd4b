"""A loop on a thread of its own: one step again and again until stopped, as the service's liveness calls, denylist
push, carrier listener and the labs' carrier watcher run. Starting, stopping with a bounded wait for the thread, and
saying why a loop ended by itself are the same for all of them, and live here."""

from __future__ import annotations

import threading
from collections.abc import Callable

Period = float | Callable[[], float]  # seconds, or asked before every wait (an owner whose period may change)


class Periodic:
    """Runs `step` on a daemon thread named `name` after waiting `every` seconds each time (0: at once again, for a
    step that blocks on a timeout of its own), until stop().

    An exception of a type in `ends_on` ends the loop: `on_end(exception)` is told, unless stop() was asked (a socket
    closed under the step by its owner's stop is no error). Any other exception ends the thread through
    threading.excepthook, as for any thread."""

    def __init__(self, name: str, step: Callable[[], None], every: Period = 0.0, *, join_within: float = 5.0,
                 ends_on: tuple[type[BaseException], ...] = (),
                 on_end: Callable[[BaseException], None] | None = None) -> None:
        self.name, self.step, self.every, self.join_within = name, step, every, join_within
        self.ends_on, self.on_end = ends_on, on_end
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> bool:
        """Ask the loop to end and wait up to `join_within` seconds for its thread: True when it has ended (or never
        ran on a thread of its own)."""
        self._stop.set()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout=self.join_within)
        return not thread.is_alive()

    def run(self) -> None:
        """The loop, in the calling thread (start() runs it in a thread of its own), until stop() or an end."""
        while not self._stop.wait(self.every() if callable(self.every) else self.every):
            try:
                self.step()
            except self.ends_on as e:
                if self.on_end is not None and not self._stop.is_set():
                    self.on_end(e)
                return
