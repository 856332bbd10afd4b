"""Waiting for a gRPC channel, then closing it, leaves gRPC's connectivity poller nothing to run on the closed
channel: no thread of it dies with "Cannot invoke RPC: Channel closed!" (a refused address, a silent one, and a
switch's start that never comes, on local sockets; no switch)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from controller.runtime.channelready import close, wait_ready
from mininet_labs.bmv2proc import SwitchStartError, wait_grpc_ready

THREADS_END_WITHIN = 20.0  # gRPC's poller looks again every 0.2 s; a loaded machine may take far longer


@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The exceptions that end any thread during the test (pytest's own hook would make them a warning)."""
    errors: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda a: errors.append(f"{a.thread}: {a.exc_value!r}"))
    yield errors


def assert_no_thread_died(errors: list[str]) -> None:
    """Once gRPC's poller threads have ended (each would have hit the closed channel by then), none died."""
    for t in threading.enumerate():
        if t.daemon and t.name.endswith("(_run)"):  # grpc's ForkManagedThread: the connectivity poller
            t.join(THREADS_END_WITHIN)
            assert not t.is_alive(), f"{t} still runs {THREADS_END_WITHIN} s after its channel was closed"
    assert errors == []


@pytest.fixture
def refused() -> Iterator[str]:
    """A local address with a socket bound and not listening: a connection there is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def silent() -> Iterator[str]:
    """A local address that accepts TCP and never speaks HTTP/2: the channel stays CONNECTING."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield f"127.0.0.1:{s.getsockname()[1]}"


def test_a_refused_address_fails_at_once_and_the_closed_channel_kills_no_thread(refused, thread_errors):
    for _ in range(10):
        channel = grpc.insecure_channel(refused)
        assert wait_ready(channel, 30) is grpc.ChannelConnectivity.TRANSIENT_FAILURE
        close(channel)
    assert_no_thread_died(thread_errors)


def test_a_channel_closed_the_moment_its_wait_ends_kills_no_thread(silent, thread_errors):
    """gRPC's poller has not even looked at the channel yet when a wait of 0 s returns: a plain
    channel.close() here kills nearly every poller."""
    for _ in range(10):
        channel = grpc.insecure_channel(silent)
        assert wait_ready(channel, 0) is grpc.ChannelConnectivity.IDLE
        close(channel)
    assert_no_thread_died(thread_errors)


def test_a_silent_address_is_still_connecting_at_the_timeout_and_closes_cleanly(silent, thread_errors):
    channel = grpc.insecure_channel(silent)
    assert wait_ready(channel, 0.3) is grpc.ChannelConnectivity.CONNECTING
    close(channel)
    assert_no_thread_died(thread_errors)


def test_keep_waiting_waits_through_failures_until_it_says_stop(refused, thread_errors):
    asked: list[int] = []

    def keep_waiting() -> bool:
        asked.append(1)
        return len(asked) < 4

    channel = grpc.insecure_channel(refused)
    assert wait_ready(channel, 60, keep_waiting=keep_waiting, check_every=0.05) is \
        grpc.ChannelConnectivity.TRANSIENT_FAILURE
    close(channel)
    assert len(asked) == 4  # failures did not end the wait: the fourth answer did
    assert_no_thread_died(thread_errors)


def test_a_switch_that_never_serves_grpc_is_a_start_error_and_kills_no_thread(refused, thread_errors):
    """The switch's start waits through many connection failures on one channel, then closes it."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(SwitchStartError) as e:
            wait_grpc_ready(refused, proc, time.monotonic() + 1.0, "sw1", [])  # a few of gRPC's connects
        assert str(e.value) == f"sw1: no gRPC server at {refused}: (no output)"
    finally:
        proc.kill()
        proc.wait()
    with pytest.raises(SwitchStartError) as e:
        wait_grpc_ready(refused, proc, float("inf"), "sw1", [])
    assert str(e.value) == "sw1: simple_switch_grpc exited (-9): (no output)"
    assert_no_thread_died(thread_errors)
