"""Waiting for a gRPC channel to connect, and closing it once gRPC's connectivity poller has left it.

A subscription to a channel's state starts gRPC's connectivity poller, a thread that looks at the channel every
0.2 s until nobody is subscribed. Closed under it, the poller's thread dies with "Cannot invoke RPC: Channel closed!"
or "Cannot monitor channel state: Channel closed!" (grpc/grpc#18995): at its start, between two looks, or carrying
out the connect request a second subscription left. So a wait subscribes once and unsubscribes before it returns
(`grpc.channel_ready_future` in a retry loop subscribes once per try), and a channel that was waited on is closed
with `close`, which lets the poller see that nobody is subscribed and end first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc

POLLER_ENDS_WITHIN = 1.0  # gRPC's poller ends at its next look (0.2 s) once nobody is subscribed; more on a loaded host
_FINAL = (grpc.ChannelConnectivity.READY, grpc.ChannelConnectivity.SHUTDOWN)


def wait_ready(channel: grpc.Channel, timeout: float, *, keep_waiting: Callable[[], bool] | None = None,
               check_every: float = 0.25) -> grpc.ChannelConnectivity:
    """Connect the channel and wait until it is READY, fails (TRANSIENT_FAILURE: a refused or unreachable address
    fails at once rather than after the whole timeout) or `timeout` passes (then the last state seen: CONNECTING,
    IDLE or TRANSIENT_FAILURE).

    With `keep_waiting` (a server still starting), a failure does not end the wait: gRPC connects again on its own,
    and the wait goes on while `keep_waiting()`, asked first and then every `check_every` seconds, says so."""
    seen: list[grpc.ChannelConnectivity] = [grpc.ChannelConnectivity.IDLE]
    changed = threading.Event()

    def on_change(state: grpc.ChannelConnectivity) -> None:
        seen.append(state)
        changed.set()

    end = time.monotonic() + timeout
    channel.subscribe(on_change, try_to_connect=True)
    try:
        while True:
            state = seen[-1]
            if state in _FINAL or (state is grpc.ChannelConnectivity.TRANSIENT_FAILURE and keep_waiting is None):
                return state
            if keep_waiting is not None and not keep_waiting():
                return state
            left = end - time.monotonic()
            if left <= 0:
                return state
            changed.wait(left if keep_waiting is None else min(left, check_every))
            changed.clear()
    finally:
        channel.unsubscribe(on_change)


def close(channel: grpc.Channel, within: float = POLLER_ENDS_WITHIN) -> None:
    """Close the channel once gRPC's connectivity poller has ended (at once when none runs; after `within` seconds
    at most). The poller's state is gRPC's own (grpc._channel): without it, the channel is closed at once."""
    state = getattr(channel, "_connectivity_state", None)
    end = time.monotonic() + within
    while getattr(state, "polling", False) and time.monotonic() < end:
        time.sleep(0.005)
    channel.close()
