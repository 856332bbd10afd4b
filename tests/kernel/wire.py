"""Run inside a lab host's namespace: send RoCEv2 frames built with scapy, or capture what arrives (JSON of hex frames).

    python3 tests/kernel/wire.py send FRAMES.json          # [{"intf": ..., "frame": hex}, ...]
    python3 tests/kernel/wire.py capture OUT.json READY SECONDS INTF...
    python3 tests/kernel/wire.py capture-ip OUT.json READY SECONDS INTF...   # every IPv6 frame but ICMPv6
"""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

ETH_P_ALL, PACKET_OUTGOING, ROCE_PORT = 0x0003, 4, 4791


def send(path: str) -> None:
    socks: dict[str, socket.socket] = {}
    for item in json.loads(Path(path).read_text()):
        s = socks.get(item["intf"])
        if s is None:
            s = socks[item["intf"]] = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((item["intf"], 0))
        s.send(bytes.fromhex(item["frame"]))
        time.sleep(0.0005)


def capture(out: str, ready: str, seconds: float, intfs: list[str], roce_only: bool = True) -> None:
    socks = []
    for i in intfs:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((i, 0))
        s.setblocking(False)
        socks.append((i, s))
    Path(ready).touch()
    got = []
    end = time.monotonic() + seconds
    import select

    while time.monotonic() < end:
        r, _, _ = select.select([s for _, s in socks], [], [], 0.05)
        for i, s in socks:
            if s in r:
                while True:
                    try:
                        data, addr = s.recvfrom(65535)
                    except BlockingIOError:
                        break
                    # RoCEv2 over IPv6 only (ND, MLD and the like are the kernel's own)
                    if addr[2] != PACKET_OUTGOING and len(data) > 58 and data[12:14] == b"\x86\xdd" and data[20] == 17 \
                            and int.from_bytes(data[56:58], "big") == ROCE_PORT:
                        got.append({"intf": i, "frame": data.hex()})
                    elif not roce_only and addr[2] != PACKET_OUTGOING and data[12:14] == b"\x86\xdd" and data[20] != 58:
                        got.append({"intf": i, "frame": data.hex()})
    Path(out).write_text(json.dumps(got))


if __name__ == "__main__":
    if sys.argv[1] == "send":
        send(sys.argv[2])
    else:
        capture(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5:], roce_only=sys.argv[1] == "capture")
