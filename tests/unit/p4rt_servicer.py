"""An in-process P4Runtime servicer that records requests, for client message-encoding tests only (not a switch)."""

from __future__ import annotations

import contextlib
import queue
import threading
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import grpc
from google.protobuf import any_pb2

from controller.runtime.proto import p4runtime_pb2, p4runtime_pb2_grpc, status_pb2, code_pb2

# Given one Update, return (google.rpc code, message) to fail it, or None to accept it.
FailRule = Callable[[p4runtime_pb2.Update], "tuple[int, str] | None"]


def _uint(u: p4runtime_pb2.Uint128) -> int:
    return (u.high << 64) | u.low


def _key(entity: p4runtime_pb2.Entity) -> tuple:
    """Identity of a stored message: what an INSERT adds and a DELETE removes."""
    kind = entity.WhichOneof("entity")
    if kind == "table_entry":
        te = entity.table_entry
        if te.is_default_action:
            return ("default", te.table_id)
        return ("entry", te.table_id, tuple(sorted(m.SerializeToString() for m in te.match)), te.priority)
    if kind == "action_profile_member":
        return ("member", entity.action_profile_member.action_profile_id, entity.action_profile_member.member_id)
    return ("group", entity.action_profile_group.action_profile_id, entity.action_profile_group.group_id)


def _wanted(request: p4runtime_pb2.Entity, stored: p4runtime_pb2.Entity) -> bool:
    """Whether a wildcard read entity selects a stored message (same kind, id 0 = all)."""
    kind = request.WhichOneof("entity")
    if kind != stored.WhichOneof("entity"):
        return False
    if kind == "table_entry":
        r, s = request.table_entry, stored.table_entry
        return r.table_id in (0, s.table_id) and r.is_default_action == s.is_default_action
    r_id = getattr(request, kind).action_profile_id
    return r_id in (0, getattr(stored, kind).action_profile_id)


@dataclass
class RecordingServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """Records every request; stores written messages by key so reads return them; can fail updates.

    `primary_election_id`: an arbitration with a lower id is answered ALREADY_EXISTS (backup).
    `fail`: per-update rule; failing updates make Write return UNKNOWN with one p4.v1.Error per
    update in google.rpc.Status details, the way PI reports batch errors.
    """

    primary_election_id: int = 0
    fail: FailRule | None = None
    arbitrations: list[p4runtime_pb2.MasterArbitrationUpdate] = field(default_factory=list)
    writes: list[p4runtime_pb2.WriteRequest] = field(default_factory=list)
    reads: list[p4runtime_pb2.ReadRequest] = field(default_factory=list)
    set_pipelines: list[p4runtime_pb2.SetForwardingPipelineConfigRequest] = field(default_factory=list)
    packets_out: list[p4runtime_pb2.PacketOut] = field(default_factory=list)
    stored: dict[tuple, p4runtime_pb2.Entity] = field(default_factory=dict)
    counters: list[p4runtime_pb2.CounterEntry] = field(default_factory=list)
    config: p4runtime_pb2.ForwardingPipelineConfig | None = None
    _streams: list[queue.Queue] = field(default_factory=list)

    # --- stream ---------------------------------------------------------------------------

    def StreamChannel(self, request_iterator, context):  # noqa: N802 (gRPC method name)
        out: queue.Queue = queue.Queue()
        self._streams.append(out)

        def consume() -> None:
            try:
                for req in request_iterator:
                    if req.HasField("arbitration"):
                        previous = self.primary_election_id
                        out.put(self._arbitrate(req.arbitration))
                        if self.primary_election_id != previous:
                            self._tell_backups(out, req.arbitration.device_id)
                    elif req.HasField("packet"):
                        self.packets_out.append(req.packet)
            except grpc.RpcError:
                pass
            out.put(None)

        threading.Thread(target=consume, daemon=True).start()
        while (msg := out.get()) is not None:
            yield msg
        self._streams.remove(out)

    def _arbitrate(self, update: p4runtime_pb2.MasterArbitrationUpdate) -> p4runtime_pb2.StreamMessageResponse:
        self.arbitrations.append(update)
        requested = _uint(update.election_id)
        if requested >= self.primary_election_id:
            self.primary_election_id = requested
        response = p4runtime_pb2.StreamMessageResponse()
        response.arbitration.device_id = update.device_id
        response.arbitration.election_id.high = self.primary_election_id >> 64
        response.arbitration.election_id.low = self.primary_election_id & ((1 << 64) - 1)
        response.arbitration.status.code = code_pb2.OK if requested == self.primary_election_id else code_pb2.ALREADY_EXISTS
        return response

    def _tell_backups(self, primary: queue.Queue, device_id: int) -> None:
        """A new primary: every other stream hears it is now a backup (P4Runtime spec 5.4)."""
        for out in self._streams:
            if out is not primary:
                response = p4runtime_pb2.StreamMessageResponse()
                response.arbitration.device_id = device_id
                response.arbitration.election_id.high = self.primary_election_id >> 64
                response.arbitration.election_id.low = self.primary_election_id & ((1 << 64) - 1)
                response.arbitration.status.code = code_pb2.ALREADY_EXISTS
                out.put(response)

    def send_packet_in(self, payload: bytes, metadata: dict[int, bytes]) -> None:
        """Push a PacketIn on every open stream."""
        msg = p4runtime_pb2.StreamMessageResponse()
        msg.packet.payload = payload
        for mid, value in metadata.items():
            msg.packet.metadata.add(metadata_id=mid, value=value)
        for out in self._streams:
            out.put(msg)

    # --- unary RPCs -----------------------------------------------------------------------

    def _check_primary(self, election_id: p4runtime_pb2.Uint128, context: grpc.ServicerContext) -> None:
        if _uint(election_id) != self.primary_election_id:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "Not primary")

    def Write(self, request, context):  # noqa: N802
        self.writes.append(request)
        self._check_primary(request.election_id, context)
        errors = [self._apply(u) for u in request.updates]
        if any(code != code_pb2.OK for code, _ in errors):
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message="Write failure")
            for code, message in errors:
                detail = any_pb2.Any()
                detail.Pack(p4runtime_pb2.Error(canonical_code=code, message=message))
                status.details.append(detail)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, "Write failure")
        return p4runtime_pb2.WriteResponse()

    def _apply(self, update: p4runtime_pb2.Update) -> tuple[int, str]:
        if self.fail is not None and (failure := self.fail(update)) is not None:
            return failure
        key = _key(update.entity)
        if update.type == p4runtime_pb2.Update.INSERT:
            if key in self.stored:
                return code_pb2.ALREADY_EXISTS, "Match entry exists, use MODIFY if you wish to change action"
        elif key not in self.stored and key[0] != "default":
            return code_pb2.NOT_FOUND, "Cannot find match entry"
        if update.type == p4runtime_pb2.Update.DELETE:
            del self.stored[key]
        else:
            self.stored[key] = update.entity
        return code_pb2.OK, ""

    def Read(self, request, context):  # noqa: N802
        self.reads.append(request)
        response = p4runtime_pb2.ReadResponse()
        for wanted in request.entities:
            if wanted.HasField("counter_entry"):
                c = wanted.counter_entry
                for entry in self.counters:
                    if entry.counter_id == c.counter_id and (not c.HasField("index") or c.index.index == entry.index.index):
                        response.entities.add().counter_entry.CopyFrom(entry)
                continue
            response.entities.extend(e for e in self.stored.values() if _wanted(wanted, e))
        yield response

    def SetForwardingPipelineConfig(self, request, context):  # noqa: N802
        self.set_pipelines.append(request)
        self._check_primary(request.election_id, context)
        self.config = request.config
        self.stored.clear()
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):  # noqa: N802
        response = p4runtime_pb2.GetForwardingPipelineConfigResponse()
        if self.config is not None:
            response.config.p4info.CopyFrom(self.config.p4info)
        return response


@contextlib.contextmanager
def serve(directory: Path, servicer: RecordingServicer) -> Iterator[str]:
    """Run `servicer` on a unix socket in `directory`; yields the "unix:/path" address."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
    address = f"unix:{directory / 'p4rt.sock'}"
    server.add_insecure_port(address)
    server.start()
    try:
        yield address
    finally:
        for out in list(servicer._streams):
            out.put(None)
        server.stop(grace=None)


def socket_dir(tmp_path: Path) -> Path:
    """tmp_path, or a shorter directory when tmp_path would exceed the unix socket path limit."""
    if len(str(tmp_path)) < 90:
        return tmp_path
    import tempfile

    return Path(tempfile.mkdtemp(prefix="p4rt"))
