"""When a traffic run's senders began sending (TrafficRun.wait_sending): the last one's CLOCK_MONOTONIC ns from the
files they write as their first packet goes; a sender that failed, or never began, is one LabError line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("scapy")

from mininet_labs.labstate import LabError  # noqa: E402
from mininet_labs.trafficrun import TrafficRun  # noqa: E402


def run_of(tmp_path: Path, **senders: list[str]) -> TrafficRun:
    run = TrafficRun(None, tmp_path, 10.0)
    run.senders = {h: subprocess.Popen(argv) for h, argv in senders.items()}
    return run


def test_the_last_sender_to_begin_sets_the_time(tmp_path: Path) -> None:
    run = run_of(tmp_path, h0=["true"], h1=["true"])
    run.sending_file("h0").write_text("1000\n")
    run.sending_file("h1").write_text("3000\n")
    assert run.wait_sending(timeout=5) == 3000
    run.kill()


def test_a_sender_that_failed_before_it_sent_is_named(tmp_path: Path) -> None:
    run = run_of(tmp_path, h0=["true"], h1=["false"])
    run.sending_file("h0").write_text("1000\n")
    (tmp_path / "send-h1.err").write_text("no NIC in plane 1\n")
    with pytest.raises(LabError, match="^sender on h1 failed: no NIC in plane 1"):
        run.wait_sending(timeout=30)


def test_a_sender_that_never_begins_is_named_once_the_bound_passes(tmp_path: Path) -> None:
    run = run_of(tmp_path, h0=["true"], h1=[sys.executable, "-c", "import time; time.sleep(30)"])
    run.sending_file("h0").write_text("1000\n")
    try:
        with pytest.raises(LabError, match="^senders not sending 1s after they were started: h1$"):
            run.wait_sending(timeout=1)
    finally:
        run.kill()
