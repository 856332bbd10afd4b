"""`fabricctl lab up --dataplane kernel`, `lab status --check`, `lab traffic`, `lab down` on a kernel lab, and the
clear errors of what it cannot do."""

from __future__ import annotations

from tests.paths import REPO

import os
import subprocess
import sys
from pathlib import Path

from mininet_labs.kernel import netns


def fabricctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricctl", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO)


def test_lab_commands_on_a_kernel_lab(kernel_ready: None, tmp_path: Path) -> None:
    tag = f"c{os.getpid()}"
    lab_dir = str(tmp_path / "lab")
    up = fabricctl("lab", "up", "--dataplane", "kernel", "--dir", lab_dir, "--tag", tag)
    try:
        assert up.returncode == 0, up.stderr
        assert "on the kernel data plane (asked for): 8 switches, 4 hosts" in up.stdout
        assert "h0: h0-eth0 fd00::1, h0-eth1 fd00:1::1" in up.stdout
        assert len(netns.existing(f"{netns.PREFIX}{tag}-")) == 12
        status = fabricctl("lab", "status", "--check", "--dir", lab_dir)
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.count("in sync") == 8
        traffic = fabricctl("lab", "traffic", "--dir", lab_dir, "--rate", "0")
        assert traffic.returncode == 0, traffic.stdout + traffic.stderr
        assert "96 sent, 96 received, 0 lost" in traffic.stdout
        balance = fabricctl("lab", "balance", "--dir", lab_dir)
        assert balance.returncode != 0 and "the kernel data plane has no" in balance.stderr
    finally:
        down = fabricctl("lab", "down", "--dir", lab_dir)
    assert down.returncode == 0, down.stderr
    assert "12 namespaces removed" in down.stdout
    assert netns.existing(f"{netns.PREFIX}{tag}-") == []


def test_what_the_kernel_lab_cannot_do_is_refused_before_anything_starts(kernel_ready: None, tmp_path: Path) -> None:
    lab_dir = tmp_path / "lab"
    pcap = fabricctl("lab", "up", "--dataplane", "kernel", "--dir", str(lab_dir), "--pcap")
    assert pcap.returncode == 2 and "--pcap needs the bmv2 data plane" in pcap.stderr
    eecmp = fabricctl("--program", "eecmp_qp_hash", "lab", "up", "--dataplane", "kernel", "--dir", str(lab_dir))
    assert eecmp.returncode != 0 and "E-ECMP on the BTH QP needs the P4 switch" in eecmp.stderr
    assert not lab_dir.exists()  # refused before anything was made


def test_a_second_lab_in_the_same_directory_comes_up(kernel_ready: None, tmp_path: Path) -> None:
    """After `lab down` the directory keeps its topology.yaml and lab-config.json; a new lab there may replace them."""
    tag, lab_dir = f"r{os.getpid()}", str(tmp_path / "lab")
    for _ in range(2):
        up = fabricctl("lab", "up", "--dataplane", "kernel", "--dir", lab_dir, "--tag", tag, "--t0", "1")
        down = fabricctl("lab", "down", "--dir", lab_dir)
        assert up.returncode == 0 and down.returncode == 0, up.stderr + down.stderr
    assert netns.existing(f"{netns.PREFIX}{tag}-") == []
