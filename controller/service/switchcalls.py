"""Calls to switches off the caller's thread: a few workers per switch, every call with a deadline the
caller never waits past, and per switch when it last answered and since when it has been silent."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

NO_ANSWER = ("DEADLINE_EXCEEDED", "UNAVAILABLE")  # in a P4RuntimeError's text: the switch did not answer


class SwitchSilent(Exception):
    """The call was not made: an earlier call to this switch went past its deadline unanswered, or
    `in_flight` calls are still running there. Nothing waits on a switch that does not answer."""


class CallLate(Exception):
    """The call did not finish within its deadline (it may still finish; its result is dropped)."""


@dataclass
class _Switch:
    pool: ThreadPoolExecutor
    in_flight: dict[int, tuple[int, int]] = field(default_factory=dict)  # call id -> (sent ns, deadline ns)
    silent_since: int | None = None  # send time of the first call past its deadline since the last answer
    answered_ns: int = 0  # when the switch last answered a call
    answered_sent_ns: int = 0  # send time of the latest call it answered
    late: int = 0  # calls that went past their deadline, ever


class SwitchCalls:
    """A worker pool per switch (`workers` threads): `submit` runs a call there and returns its Future
    at once; `call` waits for it at most its deadline. The function gets the deadline in seconds and
    must pass it to the switch (the gRPC call's timeout), so a worker is held at most that long. A
    switch that left a call unanswered past its deadline is *silent* until it answers again: only
    `probe=True` calls (the liveness check) reach it meanwhile, the rest fail at once (SwitchSilent),
    so one hung switch holds no caller and fills no queue."""

    def __init__(self, names: Iterable[str], deadline: float = 0.5, *, workers: int = 2, in_flight: int = 4,
                 clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.deadline = deadline
        self.max_in_flight = in_flight
        self.clock = clock
        self._lock = threading.Lock()
        self._ids = 0
        self._switches = {n: _Switch(ThreadPoolExecutor(workers, thread_name_prefix=f"call-{n}")) for n in names}

    # --- making calls ----------------------------------------------------------------------------
    def submit(self, name: str, fn: Callable[[float], T], deadline: float | None = None, *,
               probe: bool = False) -> Future[T]:
        """Run fn(deadline) on the switch's worker; SwitchSilent at once when it does not answer."""
        deadline = self.deadline if deadline is None else deadline
        sw = self._switches[name]
        now = self.clock()
        with self._lock:
            self._expire(sw, now)
            if sw.silent_since is not None and not probe:
                raise SwitchSilent(f"{name}: silent since a call went {self._ms(now - sw.silent_since)} ms unanswered")
            if len(sw.in_flight) >= self.max_in_flight:
                raise SwitchSilent(f"{name}: {len(sw.in_flight)} calls still running there")
            self._ids += 1
            call_id = self._ids
            sw.in_flight[call_id] = (now, now + int(deadline * 1e9))
        return sw.pool.submit(self._run, name, call_id, fn, deadline)

    def call(self, name: str, fn: Callable[[float], T], deadline: float | None = None) -> T:
        """fn's result, waiting at most the deadline (CallLate past it; SwitchSilent, or fn's own error)."""
        deadline = self.deadline if deadline is None else deadline
        future = self.submit(name, fn, deadline)
        try:
            return future.result(timeout=deadline)
        except TimeoutError:
            raise CallLate(f"{name}: no answer within {deadline * 1000:.0f} ms") from None

    def gather(self, calls: Mapping[str, Callable[[float], Any]], deadline: float | None = None, *,
               probe: bool = False) -> dict[str, Any]:
        """One call per switch, all at once; per switch its result or the exception (SwitchSilent,
        CallLate, or the call's own), after at most the deadline in all. `probe`: the calls reach a
        silent switch too (as the liveness check: their answer ends its silence)."""
        deadline = self.deadline if deadline is None else deadline
        out: dict[str, Any] = {}
        futures: dict[str, Future[Any]] = {}
        for name, fn in calls.items():
            try:
                futures[name] = self.submit(name, fn, deadline, probe=probe)
            except SwitchSilent as e:
                out[name] = e
        end = time.monotonic() + deadline
        for name, future in futures.items():
            try:
                out[name] = future.result(timeout=max(0.0, end - time.monotonic()))
            except TimeoutError:
                out[name] = CallLate(f"{name}: no answer within {deadline * 1000:.0f} ms")
            except Exception as e:  # the call's own error, handed back as a value
                out[name] = e
        return out

    def _run(self, name: str, call_id: int, fn: Callable[[float], T], deadline: float) -> T:
        sw = self._switches[name]
        try:
            result = fn(deadline)
        except Exception as e:
            self._finished(sw, call_id, answered=not any(k in str(e) for k in NO_ANSWER))
            raise
        self._finished(sw, call_id, answered=True)
        return result

    def _finished(self, sw: _Switch, call_id: int, answered: bool) -> None:
        now = self.clock()
        with self._lock:
            sent, due = sw.in_flight.pop(call_id, (now, now))
            if answered and now <= due:
                sw.answered_ns = now
                sw.answered_sent_ns = max(sw.answered_sent_ns, sent)
                sw.silent_since = None
            else:
                sw.late += 1
                if sent > sw.answered_sent_ns:  # a call sent after it was answered since: stale, not silence
                    sw.silent_since = sent if sw.silent_since is None else min(sw.silent_since, sent)

    def _expire(self, sw: _Switch, now: int) -> None:
        """Calls still running past their deadline make the switch silent (without waiting for them)."""
        for sent, due in sw.in_flight.values():
            if due < now and sent > sw.answered_sent_ns and (sw.silent_since is None or sent < sw.silent_since):
                sw.silent_since = sent

    @staticmethod
    def _ms(ns: int) -> int:
        return round(ns / 1e6)

    # --- what the switches did ---------------------------------------------------------------------
    def silent_since(self, name: str) -> int | None:
        """Send time (monotonic ns) of the first call the switch left unanswered past its deadline
        since it last answered; None while it answers."""
        sw = self._switches[name]
        with self._lock:
            self._expire(sw, self.clock())
            return sw.silent_since

    def answered_ns(self, name: str) -> int:
        """When the switch last answered a call in time (monotonic ns; 0: never)."""
        return self._switches[name].answered_ns

    def answered_sent_ns(self, name: str) -> int:
        """Send time of the latest call the switch answered in time."""
        return self._switches[name].answered_sent_ns

    def idle(self, name: str) -> bool:
        with self._lock:
            return not self._switches[name].in_flight

    def late(self, name: str) -> int:
        return self._switches[name].late

    def close(self) -> None:
        for sw in self._switches.values():
            sw.pool.shutdown(wait=False, cancel_futures=True)
