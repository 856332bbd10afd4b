"""Table entries per second into one simple_switch_grpc: this client's batched writes (requests
encoded by controller.runtime.wire) against the same batches as protobuf's own messages (upb), p4runtime-shell's one
update per request and a raw loop of pre-encoded batched WriteRequests on a plain gRPC stub, on the
same switch in the same run; and, as a floor, the same requests serialised beforehand and sent as
bytes (transport and switch only).

Each case starts from a freshly pushed srv6_spray pipeline (empty tables) and inserts the same
`--entries` entries, in turn a routes_v6 /128 (set_next_hop), a pinned_path (encap_carrier) and a
spray_dest /64 (set_spray), since each table holds at most 4096; the switch is read back after
each case and must hold exactly those entries. Every case runs --repeat times, the cases taking
turns; each reports its median (and min, max). Every timed region starts after a full garbage
collection (clock()), so that no case pays for one the untimed work before it made due.
p4runtime-shell runs in its own environment (controller.runtime.shellenv: $FABRIC_SHELL_PYTHON or
the venv `fabricctl shell` makes); without one that case is skipped. Prints one JSON document: entries/s per case, the time encoding alone
takes, and the ratios (aims: this client >= 10x p4runtime-shell, >= 0.8 of the raw loop, >= 0.6 of
the raw bytes). Needs root and simple_switch_grpc. Not a test: nothing here asserts a time.

    python3 bench/install_rate.py [--entries 10000] [--batch-size 500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import ipaddress
import json
import os
import queue
import statistics
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc  # noqa: E402

from controller.runtime import codec, wire  # noqa: E402
from controller.runtime.codec import canonical  # noqa: E402
from controller.plan.entries import Exact, Lpm, TableEntry  # noqa: E402
from controller.runtime.p4info import P4Info  # noqa: E402
from controller.runtime.p4rt import SwitchConnection  # noqa: E402
from controller.programs.toolchain import Artifacts, find_binary  # noqa: E402
from controller.runtime import shellenv  # noqa: E402
from controller.runtime.proto import implementation, p4runtime_pb2, p4runtime_pb2_grpc, protobuf_version  # noqa: E402
from mininet_labs.nsswitch import NetnsSwitch  # noqa: E402

ROUTES = "IngressPipe.routing.routes_v6"  # host /128 -> set_next_hop(port, smac, dmac)
PINNED = "IngressPipe.headend.pinned_path"  # (dst_addr, dest_qp) -> encap_carrier(carrier, path_index)
SPRAY_DEST = "IngressPipe.headend.spray_dest"  # leaf /64 -> set_spray(mode, dst_usids)
TABLES = (ROUTES, PINNED, SPRAY_DEST)  # entry i goes to TABLES[i % 3]
TABLE_SIZE = 4096  # each of them (srv6_spray.p4); bmv2 refuses an entry beyond it
PORTS = (1, 2, 3, 4)
DEVICE_ID = 1
ELECTION_ID = 1  # every case arbitrates with (high 0, low 1), one case at a time
HOSTS = int(ipaddress.IPv6Address("fd00:1::"))
LEAVES = int(ipaddress.IPv6Address("fd00:2::"))
CARRIER = int(ipaddress.IPv6Address("fcbb:bb00:1001:1403:1fff::"))


def v6(value: int) -> str:
    return str(ipaddress.IPv6Address(value))


def fields(i: int) -> tuple[str, dict[str, str], str, dict[str, str]]:
    """Entry i as strings: (table, match field -> value, action, parameter -> value)."""
    k = i // len(TABLES)
    table = TABLES[i % len(TABLES)]
    if table == ROUTES:
        port = PORTS[k % len(PORTS)]
        mac = f"02:bb:00:00:{k >> 8 & 0xFF:02x}:{k & 0xFF:02x}"
        return table, {"dst_addr": f"{v6(HOSTS + k + 1)}/128"}, "IngressPipe.routing.set_next_hop", {
            "port": str(port), "smac": f"02:aa:00:00:00:{port:02x}", "dmac": mac}
    if table == PINNED:
        return table, {"dst_addr": v6(HOSTS + k + 1), "dest_qp": str(0x100 + k)}, "IngressPipe.headend.encap_carrier", {
            "carrier": v6(CARRIER | (k & 0xFFFF) << 48), "path_index": str(k & 0xFFFF)}
    return table, {"dst_addr": f"{v6(LEAVES + (k << 64))}/64"}, "IngressPipe.headend.set_spray", {
        "mode": str(k % 3), "dst_usids": str(0x1400_1FFF + (k << 16 & 0x3FF0000))}


def entries(n: int) -> list[TableEntry]:
    """The n entries as the controller's planner writes them (addresses and MACs as strings)."""
    out = []
    for i in range(n):
        table, match, action, params = fields(i)
        keys = tuple((f, Lpm(v.split("/")[0], int(v.split("/")[1])) if "/" in v else Exact(_value(v)))
                     for f, v in match.items())
        out.append(TableEntry(table, keys, action, tuple((p, _value(v)) for p, v in params.items())))
    return out


def _value(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def reset(address: str, artifacts: Artifacts) -> None:
    """A fresh pipeline: the switch's tables are empty."""
    with SwitchConnection("reset", address, DEVICE_ID, ELECTION_ID) as conn:
        conn.set_pipeline(artifacts)


def held(address: str, p4info: P4Info) -> list:
    """Every entry the switch holds (in the controller's canonical form)."""
    with SwitchConnection("check", address, DEVICE_ID, ELECTION_ID, p4info=p4info) as conn:
        return conn.read_entries()


def clock() -> float:
    """The start of a timed region, after a full garbage collection: a collection of the bench's whole heap
    (50-70 ms here) is due at some point after the untimed work between cases (reading 10,000 entries back,
    building requests), and would otherwise fall in whichever case's timed region allocates next."""
    gc.collect()
    return time.perf_counter()


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return round(time.perf_counter() - start, 3)


# --- the clients -----------------------------------------------------------------------------

def this_client(address: str, p4info: P4Info, todo: list[TableEntry], batch_size: int) -> float:
    """SwitchConnection.write: encoding and checking every entity, then batched WriteRequests. The updates
    are given as the planner gives them, a list made before the timer starts (as the other cases' inputs are)."""
    updates = [("INSERT", e) for e in todo]
    with SwitchConnection("bench", address, DEVICE_ID, ELECTION_ID, p4info=p4info) as conn:
        start = clock()
        conn.write(updates, batch_size=batch_size)
        return time.perf_counter() - start


@contextmanager
def primary_channel(address: str) -> Iterator[grpc.Channel]:
    """A plain channel on which we are primary (arbitrated on a stream of its own, held open)."""
    outgoing: queue.Queue = queue.Queue()
    with grpc.insecure_channel(address) as channel:
        stream = p4runtime_pb2_grpc.P4RuntimeStub(channel).StreamChannel(iter(outgoing.get, None))
        arbitration = p4runtime_pb2.StreamMessageRequest()
        arbitration.arbitration.device_id = DEVICE_ID
        arbitration.arbitration.election_id.low = ELECTION_ID
        outgoing.put(arbitration)
        answer = next(stream)
        if answer.arbitration.status.code != 0:
            raise RuntimeError(f"not primary: {answer.arbitration.status.message}")
        try:
            yield channel
        finally:
            outgoing.put(None)
            stream.cancel()


def _bytes_write(channel: grpc.Channel) -> Callable:
    return channel.unary_unary("/p4.v1.P4Runtime/Write", request_serializer=lambda b: b,
                               response_deserializer=p4runtime_pb2.WriteResponse.FromString)


def message_requests(p4info: P4Info, todo: list[TableEntry], batch_size: int) -> list[p4runtime_pb2.WriteRequest]:
    """The WriteRequests of this_client built as protobuf messages (each entity checked by codec.fill_entity)."""
    out = []
    for i in range(0, len(todo), batch_size):
        request = p4runtime_pb2.WriteRequest(device_id=DEVICE_ID)
        request.election_id.low = ELECTION_ID
        add = request.updates.add
        for e in todo[i:i + batch_size]:
            codec.fill_entity(add(type=p4runtime_pb2.Update.INSERT).entity, e, p4info)
        out.append(request)
    return out


def wire_requests(p4info: P4Info, todo: list[TableEntry], batch_size: int) -> list[bytes]:
    """The same WriteRequests as controller.runtime.wire writes them (what SwitchConnection.write sends)."""
    encoded = wire.updates_bytes([("INSERT", e) for e in todo], p4info)
    return [wire.write_request(DEVICE_ID, ELECTION_ID, encoded[i:i + batch_size])
            for i in range(0, len(encoded), batch_size)]


def message_client(address: str, p4info: P4Info, todo: list[TableEntry], batch_size: int) -> float:
    """this_client with protobuf's own messages instead of controller.runtime.wire: every request built (every
    entity checked) first, then sent on the stub, which serialises them; timed as this_client."""
    with primary_channel(address) as channel:
        write = p4runtime_pb2_grpc.P4RuntimeStub(channel).Write
        start = clock()
        for request in message_requests(p4info, todo, batch_size):
            write(request, timeout=60)
        return time.perf_counter() - start


# Run by p4runtime-shell's own interpreter: the entries come as JSON on stdin, the time goes to stdout.
_SHELL_CASE = """\
import json, sys, time
import p4runtime_sh.shell as sh
job = json.load(sys.stdin)
sh.setup(device_id=job["device_id"], grpc_addr=job["address"], election_id=(0, job["election_id"]), verbose=False,
         config=sh.FwdPipeConfig(job["p4info"], job["bmv2_json"]))
try:
    start = time.perf_counter()
    for table, match, action, params in job["entries"]:
        te = sh.TableEntry(table)(action=action)
        for name, value in match.items():
            te.match[name] = value
        for name, value in params.items():
            te.action[name] = value
        te.insert()
    print(json.dumps({"seconds": time.perf_counter() - start}))
finally:
    sh.teardown()
"""


def p4runtime_shell(python: Path, address: str, artifacts: Artifacts, n: int) -> float:
    """p4runtime-shell's TableEntry API, in its own environment: one entry built and inserted (one
    WriteRequest) at a time; only its insert loop is timed (by itself)."""
    job = {"device_id": DEVICE_ID, "address": address, "election_id": ELECTION_ID, "p4info": str(artifacts.p4info),
           "bmv2_json": str(artifacts.bmv2_json), "entries": [fields(i) for i in range(n)]}
    done = subprocess.run([str(python), "-c", _SHELL_CASE], input=json.dumps(job), capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"p4runtime-shell case failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def raw_loop(address: str, p4info: P4Info, todo: list[TableEntry], batch_size: int, pre_serialised: bool) -> float:
    """Pre-encoded WriteRequests of batch_size updates each, written one after the other on a
    plain stub (after arbitration on a stream of its own); only the Write loop is timed.

    pre_serialised=False: the requests are messages, which the stub serialises in the loop (this
    is "the raw loop" of the aim). True: they are serialised before the timer starts and go out as
    bytes: what the transport and the switch alone take (a floor, no client can go below it)."""
    election = p4runtime_pb2.Uint128(high=0, low=ELECTION_ID)
    updates = [p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT, entity=codec.encode_entity(e, p4info))
               for e in todo]
    requests = [p4runtime_pb2.WriteRequest(device_id=DEVICE_ID, election_id=election,
                                           updates=updates[i:i + batch_size])
                for i in range(0, len(updates), batch_size)]
    if pre_serialised:
        requests = [r.SerializeToString() for r in requests]
    with primary_channel(address) as channel:
        write = _bytes_write(channel) if pre_serialised else p4runtime_pb2_grpc.P4RuntimeStub(channel).Write
        start = clock()
        for request in requests:
            write(request, timeout=60)
        return time.perf_counter() - start


def summary(n: int, seconds: list[float]) -> dict:
    """A case's runs: entries/s of the median run, and the fastest and slowest."""
    return {"entries": n, "runs": len(seconds), "seconds_median": round(statistics.median(seconds), 3),
            "entries_per_s": round(n / statistics.median(seconds), 1),
            "entries_per_s_min": round(n / max(seconds), 1), "entries_per_s_max": round(n / min(seconds), 1)}


# --- main ------------------------------------------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10000)
    parser.add_argument("--batch-size", type=int, default=500, help="updates per WriteRequest (batched cases)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of every case (they take turns)")
    args = parser.parse_args()
    if not 0 < args.entries <= len(TABLES) * TABLE_SIZE:
        parser.error(f"--entries must be 1..{len(TABLES) * TABLE_SIZE} (three tables of {TABLE_SIZE} entries)")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if find_binary("simple_switch_grpc") is None or os.geteuid() != 0:
        print(json.dumps({"skipped": "needs root and simple_switch_grpc"}))
        return 2
    artifacts = Artifacts.of("srv6_spray")
    p4info = P4Info.load(artifacts.p4info)
    todo = entries(args.entries)
    expected = Counter(canonical(e, p4info) for e in todo)
    shell = shellenv.find()
    cases = {
        "switch_connection_batched": lambda a: this_client(a, p4info, todo, args.batch_size),
        "protobuf_messages_batched": lambda a: message_client(a, p4info, todo, args.batch_size),
        "raw_grpc_batched": lambda a: raw_loop(a, p4info, todo, args.batch_size, pre_serialised=False),
        "raw_bytes_batched": lambda a: raw_loop(a, p4info, todo, args.batch_size, pre_serialised=True),
    }
    if shell is not None:
        cases["p4runtime_shell_one_per_request"] = lambda a: p4runtime_shell(shell.python, a, artifacts, args.entries)
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    with NetnsSwitch(f"inst{os.getpid()}", ports=PORTS, device_id=DEVICE_ID) as switch:
        address = switch.grpc_address
        for _ in range(args.repeat):
            for name, run in cases.items():
                reset(address, artifacts)
                seconds[name].append(run(address))
                found = Counter(held(address, p4info))
                if found != expected:
                    raise SystemExit(f"{name}: the switch holds {sum((found - expected).values())} entries too many "
                                     f"and lacks {sum((expected - found).values())}")
    results: dict = {name: summary(args.entries, s) for name, s in seconds.items()}
    if shell is None:
        results["p4runtime_shell_one_per_request"] = {
            "skipped": "no p4runtime-shell environment (FABRIC_SHELL_PYTHON, or run `fabricctl shell` once)"}
    # where the time goes: encoding (and checking) alone, no switch, median of --repeat runs each
    def median_time(work: Callable[[], object]) -> float:
        return round(statistics.median(timed(work) for _ in range(args.repeat)), 3)

    if [r.SerializeToString() for r in message_requests(p4info, todo, args.batch_size)] != wire_requests(
            p4info, todo, args.batch_size):
        raise SystemExit("the wire encoder's bytes differ from protobuf's")
    results["encode_only_seconds"] = {
        "canonical_only": median_time(lambda: [canonical(e, p4info) for e in todo]),
        "wire_requests": median_time(lambda: wire_requests(p4info, todo, args.batch_size)),
        "message_requests_serialised": median_time(
            lambda: [r.SerializeToString() for r in message_requests(p4info, todo, args.batch_size)]),
    }
    ours = results["switch_connection_batched"]["entries_per_s"]
    if shell is not None:
        results["ratio_vs_p4runtime_shell"] = round(ours / results["p4runtime_shell_one_per_request"]["entries_per_s"], 2)
    results["ratio_protobuf_messages_vs_this_client"] = round(
        results["protobuf_messages_batched"]["entries_per_s"] / ours, 3)
    results["ratio_vs_raw_grpc"] = round(ours / results["raw_grpc_batched"]["entries_per_s"], 3)
    results["ratio_vs_raw_bytes"] = round(ours / results["raw_bytes_batched"]["entries_per_s"], 3)
    results["aim"] = {"ratio_vs_p4runtime_shell": ">= 10", "ratio_vs_raw_grpc": ">= 0.8", "ratio_vs_raw_bytes": ">= 0.6"}
    results["config"] = {"entries": args.entries, "batch_size": args.batch_size, "repeat": args.repeat,
                         "tables": {t: len(range(i, args.entries, len(TABLES))) for i, t in enumerate(TABLES)},
                         "program": "srv6_spray", "grpc": "unix socket", "cpus": os.cpu_count(),
                         "load_average": [round(x, 2) for x in os.getloadavg()],
                         "protobuf": f"{protobuf_version} ({implementation()})"}
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
