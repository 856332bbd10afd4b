"""The loop on a thread of its own: its steps, its period, stopping it, and how it ends by itself."""

from __future__ import annotations

import queue
import threading

import pytest

from controller.periodic import Periodic

WITHIN = 30.0  # a deadline for what a loaded machine does at once


def test_steps_run_on_the_named_thread_until_stop_and_none_after():
    ran: queue.Queue[str] = queue.Queue()
    loop = Periodic("the-loop", lambda: ran.put(threading.current_thread().name))
    loop.start()
    assert [ran.get(timeout=WITHIN) for _ in range(3)] == ["the-loop"] * 3
    assert loop.stop() is True
    assert loop.stopping
    ran.queue.clear()
    assert loop.stop() is True  # twice is harmless
    assert ran.empty()


def test_the_period_is_asked_before_every_wait():
    asked: list[int] = []
    steps = threading.Event()

    def every() -> float:
        asked.append(1)
        return 0.0

    def step() -> None:
        if len(asked) >= 3:
            steps.set()

    loop = Periodic("p", step, every)
    loop.start()
    try:
        assert steps.wait(WITHIN)
    finally:
        loop.stop()
    assert len(asked) >= 3


def test_an_ending_error_is_told_once_and_ends_the_loop():
    told: queue.Queue[BaseException] = queue.Queue()
    calls: list[int] = []

    def step() -> None:
        calls.append(1)
        raise ConnectionResetError(104, "Connection reset by peer")

    loop = Periodic("p", step, ends_on=(OSError,), on_end=told.put)
    loop.start()
    e = told.get(timeout=WITHIN)
    assert isinstance(e, ConnectionResetError) and e.strerror == "Connection reset by peer"
    assert loop.stop() is True
    assert calls == [1] and told.empty()


def test_an_ending_error_after_stop_was_asked_is_not_told():
    told: list[BaseException] = []
    loop = Periodic("p", lambda: None, ends_on=(OSError,), on_end=told.append)

    def step() -> None:
        loop.stop()  # from the loop's own thread: no wait on itself
        raise OSError(9, "Bad file descriptor")  # what a socket closed by the owner's stop gives

    loop.step = step
    loop.start()
    assert loop._thread is not None
    loop._thread.join(WITHIN)
    assert not loop._thread.is_alive()
    assert told == []


def test_any_other_error_ends_the_thread_through_the_excepthook(monkeypatch: pytest.MonkeyPatch):
    hooked: queue.Queue[str] = queue.Queue()
    monkeypatch.setattr(threading, "excepthook", lambda a: hooked.put(f"{a.thread.name}: {a.exc_value!r}"))
    told: list[BaseException] = []

    def step() -> None:
        raise KeyError("p0-t0-0")

    loop = Periodic("p", step, ends_on=(OSError,), on_end=told.append)
    loop.start()
    assert hooked.get(timeout=WITHIN) == "p: KeyError('p0-t0-0')"
    assert loop.stop() is True
    assert told == []


def test_run_in_the_callers_thread_ends_when_stop_is_asked():
    steps: list[int] = []
    loop = Periodic("p", lambda: None)

    def step() -> None:
        steps.append(1)
        if len(steps) == 3:
            loop.stop()  # as a signal handler does

    loop.step = step
    loop.run()
    assert steps == [1, 1, 1]


def test_stop_before_start_returns_at_once():
    loop = Periodic("p", lambda: None, 3600.0)
    assert loop.stop() is True
    loop.start()  # a stopped loop that starts ends before its first step
    assert loop.stop() is True
