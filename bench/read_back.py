"""Reading back 10,000 table entries as reconcile does it (SwitchConnection.read_all: one Read of every
table, every entry parsed and decoded to the controller's entities), with protobuf's C core (upb)
against its pure-Python implementation, on the same switch in the same run.

One simple_switch_grpc gets the srv6_spray pipeline and bench/install_rate.py's `--entries` entries.
This process (upb) and a subprocess of this script with PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python
(the baseline: what the controller ran on before, protobuf 3.20 being pure Python) each time, --repeat
times, (a) read_all against the switch, end to end, and (b) the client side alone: parsing the
ReadResponse bytes the switch sent and decoding every entity. Both must read exactly the entries
installed. Prints one JSON document with medians, min/max and the ratios python/upb (aim >= 10 for
the read). Needs root and simple_switch_grpc. Not a test: nothing here asserts a time.

    python3 bench/read_back.py [--entries 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import grpc  # noqa: E402

from controller.runtime import codec  # noqa: E402
from controller.runtime.codec import canonical  # noqa: E402
from controller.runtime.p4info import P4Info  # noqa: E402
from controller.runtime.p4rt import SwitchConnection  # noqa: E402
from controller.runtime.proto import implementation, p4runtime_pb2, protobuf_version  # noqa: E402
from controller.programs.toolchain import Artifacts, find_binary  # noqa: E402
from install_rate import DEVICE_ID, ELECTION_ID, PORTS, TABLES, TABLE_SIZE, entries  # noqa: E402

READER_ELECTION_ID = 0  # reads need no arbitration; the worker and we use connect_reader


def digest(held: list) -> str:
    """One hash of a multiset of entities (order-free), to show both sides read the same."""
    return hashlib.sha256("\n".join(sorted(repr(e) for e in held)).encode()).hexdigest()[:16]


def measure(address: str, p4info: P4Info, repeat: int) -> dict:
    """read_all end to end, and parse + decode of the same ReadResponse bytes, `repeat` times each."""
    conn = SwitchConnection("read", address, DEVICE_ID, READER_ELECTION_ID, p4info=p4info, timeout=60)
    conn.connect_reader()
    try:
        full: list[float] = []
        held: list = []
        for _ in range(repeat):
            held = []  # the last run's entities are not kept alive through the next (reconcile holds one read)
            gc.collect()  # each run starts from the same heap, so a full collection owed to the bench's own
            start = time.perf_counter()  # garbage does not land in one side's timed region
            held = conn.read_all()
            full.append(time.perf_counter() - start)
        # the same Read, its responses kept as bytes (no parsing) for the client-side timing
        request = p4runtime_pb2.ReadRequest(device_id=DEVICE_ID)
        request.entities.extend(_reads(p4info))
        read = conn._channel.unary_stream("/p4.v1.P4Runtime/Read",  # type: ignore[union-attr]
                                          request_serializer=p4runtime_pb2.ReadRequest.SerializeToString,
                                          response_deserializer=lambda b: b)
        raw = list(read(request, timeout=60))
    finally:
        conn.close()
    client: list[float] = []
    decoded: list = []
    for _ in range(repeat):
        decoded = []
        gc.collect()
        start = time.perf_counter()
        decoded = [codec.decode_entity(e, p4info) for data in raw
                   for e in p4runtime_pb2.ReadResponse.FromString(data).entities]
        client.append(time.perf_counter() - start)
    assert digest(decoded) == digest(held)
    return {"implementation": implementation(), "protobuf": protobuf_version, "entities": len(held),
            "digest": digest(held), "response_bytes": sum(map(len, raw)),
            "read_all_seconds": _stats(full), "parse_decode_seconds": _stats(client)}


def _reads(p4info: P4Info) -> list:
    """The entities read_all asks for (every non-const table, every profile's members and groups)."""
    out = [codec.table_read(p4info, t.name) for t in p4info.tables if not t.is_const]
    for profile in p4info.action_profiles:
        out.append(codec.members_read(p4info, profile.name))
        if profile.with_selector:
            out.append(codec.groups_read(p4info, profile.name))
    return out


def _stats(seconds: list[float]) -> dict:
    return {"median": round(statistics.median(seconds), 4), "min": round(min(seconds), 4),
            "max": round(max(seconds), 4), "runs": len(seconds)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--worker", metavar="ADDRESS", help=argparse.SUPPRESS)  # the baseline subprocess
    args = parser.parse_args()
    artifacts = Artifacts.of("srv6_spray")
    p4info = P4Info.load(artifacts.p4info)
    if args.worker:
        print(json.dumps(measure(args.worker, p4info, args.repeat)))
        return 0
    if not 0 < args.entries <= len(TABLES) * TABLE_SIZE:
        parser.error(f"--entries must be 1..{len(TABLES) * TABLE_SIZE} (three tables of {TABLE_SIZE} entries)")
    if find_binary("simple_switch_grpc") is None or os.geteuid() != 0:
        print(json.dumps({"skipped": "needs root and simple_switch_grpc"}))
        return 2
    from mininet_labs.nsswitch import NetnsSwitch

    todo = entries(args.entries)
    with NetnsSwitch(f"rdbk{os.getpid()}", ports=PORTS, device_id=DEVICE_ID) as switch:
        address = switch.grpc_address
        with SwitchConnection("load", address, DEVICE_ID, ELECTION_ID, p4info=p4info) as conn:
            conn.set_pipeline(artifacts)
            conn.write([("INSERT", e) for e in todo])
        upb = measure(address, p4info, args.repeat)
        env = {**os.environ, "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"}
        done = subprocess.run([sys.executable, __file__, "--worker", address, "--repeat", str(args.repeat)],
                              env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise SystemExit(f"the pure-Python worker failed: {done.stderr.strip()[-800:]}")
        python = json.loads(done.stdout.strip().splitlines()[-1])
    expected = digest([canonical(e, p4info) for e in todo])
    for side in (upb, python):
        if side["entities"] != len(todo) or side["digest"] != expected:
            raise SystemExit(f"{side['implementation']}: read {side['entities']} entities, not the {len(todo)} installed")
    if (upb["implementation"], python["implementation"]) != ("upb", "python"):
        raise SystemExit(f"implementations were {upb['implementation']} and {python['implementation']}")
    results = {
        "upb": upb,
        "python": python,
        "ratio_read_all": round(python["read_all_seconds"]["median"] / upb["read_all_seconds"]["median"], 1),
        "ratio_parse_decode": round(python["parse_decode_seconds"]["median"] / upb["parse_decode_seconds"]["median"], 1),
        "aim": {"ratio_read_all": ">= 10"},
        "config": {"entries": args.entries, "repeat": args.repeat, "program": "srv6_spray", "grpc": "unix socket",
                   "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]},
    }
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
