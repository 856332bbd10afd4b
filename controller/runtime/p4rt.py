"""P4Runtime client for one switch: arbitration, pipeline, batched writes with per-update errors, reads."""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import grpc

from controller.runtime import codec, wire
from controller.plan.entries import ActionProfileMember, CounterValue, Entity, Exact, Lpm, Match, TableEntry, Value
from controller.runtime.p4info import P4Info, pipeline_differences
from controller.plan.delta import Update, UpdateType
from controller.runtime.channelready import close as close_channel, wait_ready
from controller.runtime.tls import channel as tls_channel, explain as tls_explain
from controller.model.tlsconfig import TlsConfig, TlsError
from controller.programs.toolchain import Artifacts
from controller.runtime.proto import code_pb2, p4runtime_pb2, p4runtime_pb2_grpc, status_pb2

ElectionId = int | tuple[int, int]
_UPDATE_TYPES = {t.value: t for t in UpdateType}  # by name, without UpdateType()'s lookup per update
log = logging.getLogger(__name__)

# A refused Write carries one p4.v1.Error per update in its trailing metadata (~90 bytes each):
# gRPC's default 16 kB metadata limit would replace a large batch's details with a transport error.
_GRPC_OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20),
                 ("grpc.max_metadata_size", 16 << 20)]
_STATUS_DETAILS_KEY = "grpc-status-details-bin"


def _identity(data: bytes) -> bytes:
    """Write requests are wire bytes already (controller.runtime.wire)."""
    return data


class _Stub(p4runtime_pb2_grpc.P4RuntimeStub):
    """The P4Runtime stub, but Write takes the WriteRequest as wire bytes (controller.runtime.wire.write_request)."""

    def __init__(self, channel: grpc.Channel) -> None:
        super().__init__(channel)  # type: ignore[call-arg]  # finsy's stub declares __new__ only; the class's __init__ takes it
        self.Write = channel.unary_unary(
            "/p4.v1.P4Runtime/Write",
            request_serializer=_identity,
            response_deserializer=p4runtime_pb2.WriteResponse.FromString,
        )


class P4RuntimeError(Exception):
    """A P4Runtime call failed (connection, arbitration, pipeline)."""


class _ElectionIdTaken(P4RuntimeError):
    """The switch still holds a stream with our election id ("Election id already exists"): retried by connect."""


class NotPrimaryError(P4RuntimeError):
    """A write was refused (or would be) because this client is not the primary controller."""


class PipelineMismatchError(P4RuntimeError):
    """The device runs a P4Info that is not ours."""


def election_int(election_id: ElectionId) -> int:
    """An election id as one 128-bit int; a tuple is (high, low)."""
    if isinstance(election_id, tuple):
        high, low = election_id
        return (high << 64) | low
    return election_id


def _uint128(value: int) -> p4runtime_pb2.Uint128:
    return p4runtime_pb2.Uint128(high=value >> 64, low=value & ((1 << 64) - 1))


def show_value(value: Value) -> str:
    """A field or parameter value for people: text as given, ints above 255 in hex."""
    return value if isinstance(value, str) else (hex(value) if value > 255 else str(value))


def _show_match(match: Match) -> str:
    if isinstance(match, Exact):
        return show_value(match.value)
    if isinstance(match, Lpm):
        return f"{show_value(match.value)}/{match.prefix_len}"
    return f"{show_value(match.value)}&&&{show_value(match.mask)}"


def describe(entity: Entity) -> str:
    """A short one-line description of an entity, for error messages."""
    if isinstance(entity, TableEntry):
        what = "default entry" if entity.is_default else " ".join(f"{n}={_show_match(m)}" for n, m in entity.match) or "*"
        return f"{entity.table} {what}"
    if isinstance(entity, ActionProfileMember):
        return f"{entity.profile} member {entity.member_id}"
    return f"{entity.profile} group {entity.group_id}"


@dataclass(frozen=True, slots=True)
class UpdateError:
    """One update the switch refused: its canonical code name (google.rpc.Code) and message."""

    update: Update
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.update.type.value} {describe(self.update.entity)}: {self.code} {self.message}".rstrip()


class WriteError(P4RuntimeError):
    """Some updates of one WriteRequest failed; `failures` lists each with its code and message.

    `written` counts the updates of the earlier, wholly successful requests; in the failed request
    the updates not in `failures` were applied (P4Runtime CONTINUE_ON_ERROR); later ones were not sent.
    """

    def __init__(self, switch: str, failures: Iterable[UpdateError], attempted: int, written: int) -> None:
        self.switch = switch
        self.failures = tuple(failures)
        self.attempted = attempted
        self.written = written
        shown = "; ".join(str(f) for f in self.failures[:3])
        more = f"; (+{len(self.failures) - 3} more)" if len(self.failures) > 3 else ""
        super().__init__(f"{switch}: {len(self.failures)} of {attempted} updates failed: {shown}{more}")


@dataclass(frozen=True, slots=True)
class PacketIn:
    """A packet the switch sent to the controller, with its packet_in metadata as ints."""

    payload: bytes
    metadata: tuple[tuple[str, int], ...]
    received_ns: int = field(default=0, compare=False)  # time.monotonic_ns() when the stream's reader took it


_STREAM_END = object()


def _log_batch(conn: SwitchConnection, batch: list[Update | tuple[str, Entity]], number: int, batches: int) -> None:
    """-v: one line per write batch (switch, address, counts); -vv: one line per entity."""
    if not log.isEnabledFor(logging.INFO):
        return
    updates = [Update(_UPDATE_TYPES[kind], entity) for kind, entity in batch]  # kinds checked by write()
    counts = {kind: sum(1 for u in updates if u.type is kind) for kind in UpdateType}
    log.info("%s (%s, device %d): write batch %d/%d: %d insert, %d modify, %d delete", conn.name, conn.address,
             conn.device_id, number, batches, counts[UpdateType.INSERT], counts[UpdateType.MODIFY],
             counts[UpdateType.DELETE])
    if log.isEnabledFor(logging.DEBUG):
        for u in updates:
            log.debug("%s:   %s %s", conn.name, u.type.value.lower(), describe(u.entity))


@dataclass(eq=False)
class SwitchConnection:
    """A P4Runtime session with one device: `address` is "host:port" or "unix:/path"; `tls` None
    is plaintext, a TlsConfig TLS (mutual TLS with its client certificate)."""

    name: str
    address: str
    device_id: int = 0
    election_id: ElectionId = 1
    p4info: P4Info | None = None
    timeout: float = 10.0
    pipeline_timeout: float = 60.0
    tls: TlsConfig | None = None
    packet_backlog: int = 64  # packet-outs queued for the stream at most; more are refused (memory stays bounded)
    packets_refused: int = field(default=0, init=False)  # packet-outs refused because the backlog was full
    fence: Callable[[], str | None] | None = None  # before each write: None, or why this controller must not write
    _channel: grpc.Channel | None = field(default=None, init=False, repr=False)
    _stub: _Stub | None = field(default=None, init=False, repr=False)
    _requests: queue.Queue = field(default_factory=queue.Queue, init=False, repr=False)
    _packets: queue.Queue = field(default_factory=queue.Queue, init=False, repr=False)
    _arbitrated: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _stream: grpc.Future | None = field(default=None, init=False, repr=False)
    _reader: threading.Thread | None = field(default=None, init=False, repr=False)
    _primary: bool = field(default=False, init=False, repr=False)
    _primary_election: int | None = field(default=None, init=False, repr=False)
    _stream_error: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not (self.address.startswith("unix:") or ":" in self.address):
            raise ValueError(f"{self.name}: address {self.address!r} is neither host:port nor unix:/path")

    # --- session ---------------------------------------------------------------------------

    def connect(self, timeout: float | None = None) -> bool:
        """Open the channel and stream, send our arbitration, wait for the answer; True if primary.

        A switch refuses our election id ("Election id already exists") while it has not yet seen the end of a
        stream we (or a previous run of ours) just closed with the same id: that is retried for up to
        the timeout (at most 2 s), since the id is free again within milliseconds.
        """
        if self.connected:
            return self._primary
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + min(timeout, 2.0)
        while True:
            try:
                return self._connect_once(timeout)
            except _ElectionIdTaken as e:
                if time.monotonic() >= deadline:
                    raise P4RuntimeError(str(e)) from None
                time.sleep(0.05)

    def connect_reader(self, timeout: float | None = None) -> None:
        """Open the channel for reads only: no stream, no arbitration, so no election id is taken and the
        switch's primary is untouched (P4Runtime lets any client Read; Write and packet I/O need connect)."""
        if self.connected:
            return
        self._open_channel(self.timeout if timeout is None else timeout)
        self._stub = _Stub(self._channel)

    def _open_channel(self, timeout: float) -> None:
        """The gRPC channel, READY, or P4RuntimeError saying why not (TLS, refused, or silent)."""
        try:
            self._channel = tls_channel(self.address, self.tls, _GRPC_OPTIONS)
        except TlsError as e:
            raise P4RuntimeError(f"{self.name}: {e}") from None
        state = wait_ready(self._channel, timeout)
        if state is not grpc.ChannelConnectivity.READY:
            self.close()
            if state is grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                # our own TLS handshake with the server says whether TLS is why (controller.runtime.tls.explain)
                why = tls_explain(self.address, self.tls, min(2.0, timeout))
                if why is not None:
                    raise P4RuntimeError(f"{self.name}: {why}")
                raise P4RuntimeError(f"{self.name}: no P4Runtime server at {self.address}: the connection failed "
                                     "at once (refused or unreachable)")
            raise P4RuntimeError(f"{self.name}: no P4Runtime server at {self.address} within {timeout}s")

    def _connect_once(self, timeout: float) -> bool:
        self._stream_error = None
        self._open_channel(timeout)
        self._stub = _Stub(self._channel)
        self._arbitrated.clear()
        self._stream = self._stub.StreamChannel(self._outgoing())
        self._reader = threading.Thread(target=self._read_stream, name=f"p4rt-{self.name}", daemon=True)
        self._reader.start()
        arbitration = p4runtime_pb2.StreamMessageRequest()
        arbitration.arbitration.device_id = self.device_id
        arbitration.arbitration.election_id.CopyFrom(_uint128(election_int(self.election_id)))
        self._requests.put(arbitration)
        if not self._arbitrated.wait(timeout):
            self.close()
            raise P4RuntimeError(f"{self.name}: no arbitration answer from {self.address} within {timeout}s")
        if self._stream_error is not None:
            error = self._stream_error
            self.close()
            kind = _ElectionIdTaken if "election id already exists" in error.lower() else P4RuntimeError
            raise kind(f"{self.name}: arbitration for device {self.device_id} on {self.address} failed: {error}")
        return self._primary

    def _outgoing(self) -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        while (item := self._requests.get()) is not _STREAM_END:
            yield item

    def _read_stream(self) -> None:
        assert self._stream is not None
        try:
            for msg in self._stream:
                kind = msg.WhichOneof("update")
                if kind == "arbitration":
                    self._primary = msg.arbitration.status.code == code_pb2.OK
                    self._primary_election = election_int((msg.arbitration.election_id.high, msg.arbitration.election_id.low))
                    self._arbitrated.set()
                elif kind == "packet":
                    self._packets.put((msg.packet, time.monotonic_ns()))
            self._stream_error = "the server ended the stream"
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                self._stream_error = f"{e.code().name} {e.details()}"
        self._primary = False
        self._arbitrated.set()

    @property
    def connected(self) -> bool:
        return self._stub is not None

    @property
    def stream_error(self) -> str | None:
        """Why the stream ended (None while it is open, or before connect)."""
        return self._stream_error

    @property
    def is_primary(self) -> bool:
        """True while the device's last arbitration update named us primary."""
        return self._primary

    def _not_primary(self) -> NotPrimaryError:
        ours = election_int(self.election_id)
        theirs = self._primary_election
        if theirs is None or theirs == ours:
            relation = f"{ours}, not the primary's"
        else:
            relation = f"{ours} {'<' if ours < theirs else '>'} {theirs}"
        return NotPrimaryError(f"not primary for device {self.device_id} on {self.address} (election id {relation})")

    def _require_primary(self) -> _Stub:
        if self._stub is None:
            raise P4RuntimeError(f"{self.name}: not connected to {self.address}")
        if self._stream_error is not None:
            raise P4RuntimeError(f"{self.name}: stream to {self.address} closed: {self._stream_error}")
        if not self._primary:
            raise self._not_primary()
        self._check_fence()
        return self._stub

    def _check_fence(self) -> None:
        why = self.fence() if self.fence is not None else None
        if why is not None:
            raise NotPrimaryError(f"{self.name}: not writing: {why}")

    def require_p4info(self) -> P4Info:
        if self.p4info is None:
            raise P4RuntimeError(f"{self.name}: no P4Info (load one, or call set_pipeline/ensure_pipeline)")
        return self.p4info

    def _rpc_error(self, what: str, e: grpc.RpcError) -> P4RuntimeError:
        if e.code() == grpc.StatusCode.PERMISSION_DENIED:
            return self._not_primary()
        return P4RuntimeError(f"{self.name}: {what} on {self.address} failed: {e.code().name} {e.details()}")

    def close(self) -> None:
        """End the stream and the channel; safe to call twice."""
        self._requests.put(_STREAM_END)
        if self._stream is not None:
            self._stream.cancel()
        if self._channel is not None:
            close_channel(self._channel)  # after gRPC's connectivity poller has ended (it dies on a closed channel)
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=self.timeout)
        self._channel = self._stub = self._stream = self._reader = None
        self._requests = queue.Queue()
        self._primary = False

    def __enter__(self) -> "SwitchConnection":
        if not self.connected:
            self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- pipeline --------------------------------------------------------------------------

    def set_pipeline(self, artifacts: Artifacts | str | Path, bmv2_json: str | Path | None = None, *,
                     p4info: P4Info | None = None) -> None:
        """Push a P4Info and bmv2 JSON with VERIFY_AND_COMMIT (this resets the device's tables).
        `p4info`: the artifacts' P4Info when the caller has it loaded already (it is not read again)."""
        if isinstance(artifacts, Artifacts):
            p4info_path, bmv2_json = artifacts.p4info, artifacts.bmv2_json
        else:
            p4info_path = Path(artifacts)
        if bmv2_json is None:
            raise ValueError(f"{self.name}: set_pipeline needs the bmv2 JSON as well as the P4Info")
        if p4info is None:
            p4info = P4Info.load(p4info_path)
        stub = self._require_primary()
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            election_id=_uint128(election_int(self.election_id)),
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
        request.config.p4info.CopyFrom(p4info.message)
        request.config.p4_device_config = Path(bmv2_json).read_bytes()
        log.info("%s (%s, device %d): push pipeline %s (%d bytes of bmv2 JSON)", self.name, self.address,
                 self.device_id, Path(bmv2_json).name, len(request.config.p4_device_config))
        try:
            stub.SetForwardingPipelineConfig(request, timeout=self.pipeline_timeout)
        except grpc.RpcError as e:
            raise self._rpc_error("SetForwardingPipelineConfig", e) from None
        self.p4info = p4info

    def get_pipeline_p4info(self) -> P4Info | None:
        """The P4Info the device runs, or None if it has no pipeline yet."""
        if self._stub is None:
            raise P4RuntimeError(f"{self.name}: not connected to {self.address}")
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE,
        )
        try:
            response = self._stub.GetForwardingPipelineConfig(request, timeout=self.timeout)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
                return None
            raise self._rpc_error("GetForwardingPipelineConfig", e) from None
        if not response.config.HasField("p4info") or not response.config.p4info.ByteSize():
            return None
        return P4Info(response.config.p4info)

    def check_pipeline(self, p4info: P4Info | None = None) -> None:
        """Refuse a device whose P4Info does not match ours (PipelineMismatchError lists how)."""
        ours = p4info or self.require_p4info()
        theirs = self.get_pipeline_p4info()
        if theirs is None:
            raise PipelineMismatchError(f"{self.name}: device {self.device_id} on {self.address} has no pipeline")
        differences = pipeline_differences(ours, theirs)
        if differences:
            shown = "; ".join(differences[:3]) + (f"; (+{len(differences) - 3} more)" if len(differences) > 3 else "")
            raise PipelineMismatchError(f"{self.name}: the device's P4Info does not match ours: {shown}")
        self.p4info = ours

    def ensure_pipeline(self, artifacts: Artifacts | str | Path, bmv2_json: str | Path | None = None) -> bool:
        """Keep the device's pipeline (and its tables) if its P4Info equals ours, else set it; True if set."""
        p4info_path = artifacts.p4info if isinstance(artifacts, Artifacts) else Path(artifacts)
        ours = P4Info.load(p4info_path)
        theirs = self.get_pipeline_p4info()
        if theirs is not None and not pipeline_differences(ours, theirs):
            self.p4info = ours
            return False
        self.set_pipeline(artifacts, bmv2_json, p4info=ours)
        return True

    # --- write -----------------------------------------------------------------------------

    def write(self, updates: Iterable[Update | tuple[str, Entity]], batch_size: int = 500,
              timeout: float | None = None) -> int:
        """Write updates, `batch_size` per WriteRequest, stopping at the first failed request.

        Every entity is encoded (and checked) before anything is sent. Returns how many were written;
        raises WriteError (per-update codes) or NotPrimaryError. The requests go out as wire bytes
        (controller.runtime.wire: the messages codec.encode_entity builds, without building them).
        `timeout`: each request's deadline (default: the connection's).
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        p4info = self.require_p4info()
        updates = list(updates)
        last = object()  # every kind checked before anything is encoded; Updates built only to log or report a batch
        try:
            for kind, _ in updates:  # (an UpdateType hashes in Python: looked up once per run of one kind)
                last = kind if kind is last or kind in _UPDATE_TYPES else _UPDATE_TYPES[kind]  # KeyError
        except (KeyError, TypeError):  # not a kind's name (or not an update): UpdateType() says so
            updates = [Update(UpdateType(kind), entity) for kind, entity in updates]
        encoded = wire.updates_bytes(updates, p4info)
        stub = self._require_primary()
        election = election_int(self.election_id)
        batches = (len(updates) + batch_size - 1) // batch_size
        for start in range(0, len(updates), batch_size):
            batch = encoded[start : start + batch_size]
            _log_batch(self, updates[start : start + batch_size], start // batch_size + 1, batches)
            if start:
                self._check_fence()
            try:
                stub.Write(wire.write_request(self.device_id, election, batch), timeout=timeout or self.timeout)
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.PERMISSION_DENIED:
                    raise self._not_primary() from None
                failures = _update_errors(e, updates[start : start + batch_size])
                raise WriteError(self.name, failures, len(batch), start) from None  # all before it written
        return len(updates)

    # --- read ------------------------------------------------------------------------------

    def read_raw(self, entities: Iterable[p4runtime_pb2.Entity], timeout: float | None = None
                 ) -> list[p4runtime_pb2.Entity]:
        """The entities a ReadRequest with these (wildcard) entities returns (`timeout`: the call's
        deadline, default the connection's)."""
        if self._stub is None:
            raise P4RuntimeError(f"{self.name}: not connected to {self.address}")
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id, entities=list(entities))
        try:
            return [e for response in self._stub.Read(request, timeout=timeout or self.timeout) for e in response.entities]
        except grpc.RpcError as e:
            raise self._rpc_error("Read", e) from None

    def read(self, requests: Iterable[p4runtime_pb2.Entity]) -> list[Entity]:
        """Read and decode table entries, members and groups (see codec.table_read and friends)."""
        p4info = self.require_p4info()
        return [codec.decode_entity(e, p4info) for e in self.read_raw(requests)]

    def read_entries(self, table: str | None = None) -> list[Entity]:
        """The entries of one table, or of every table (not default entries)."""
        return self.read([codec.table_read(self.require_p4info(), table)])

    def read_default(self, table: str) -> list[Entity]:
        """A table's default entry."""
        return self.read([codec.table_read(self.require_p4info(), table, default=True)])

    def read_members(self, profile: str) -> list[Entity]:
        return self.read([codec.members_read(self.require_p4info(), profile)])

    def read_groups(self, profile: str) -> list[Entity]:
        return self.read([codec.groups_read(self.require_p4info(), profile)])

    def read_all(self, default_tables: Iterable[str] = ()) -> list[Entity]:
        """Entries of every non-const table, members and groups of every profile, and the named default entries."""
        p4info = self.require_p4info()
        requests = [codec.table_read(p4info, t.name) for t in p4info.tables if not t.is_const]
        for profile in p4info.action_profiles:
            requests.append(codec.members_read(p4info, profile.name))
            if profile.with_selector:
                requests.append(codec.groups_read(p4info, profile.name))
        requests += [codec.table_read(p4info, t, default=True) for t in default_tables]
        return self.read(requests)

    def read_counter(self, name: str, index: int | None = None, timeout: float | None = None) -> list[CounterValue]:
        """One counter cell (a one-item list), or every cell of the counter, sorted by index."""
        p4info = self.require_p4info()
        values = [codec.decode_counter(e, p4info)
                  for e in self.read_raw([codec.counter_read(p4info, name, index)], timeout)]
        return sorted(values, key=lambda v: v.index)

    def read_counter_cells(self, name: str, indices: Iterable[int]) -> list[CounterValue]:
        """Several cells of one counter in one Read, sorted by index."""
        p4info = self.require_p4info()
        reads = [codec.counter_read(p4info, name, i) for i in sorted(set(indices))]
        if not reads:
            return []
        return sorted((codec.decode_counter(e, p4info) for e in self.read_raw(reads)), key=lambda v: v.index)

    def capabilities(self, timeout: float) -> str:
        """The switch's P4Runtime API version (the Capabilities RPC): the cheapest call a switch
        answers, so the service's liveness check; P4RuntimeError past `timeout` seconds."""
        if self._stub is None:
            raise P4RuntimeError(f"{self.name}: not connected to {self.address}")
        try:
            return self._stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=timeout).p4runtime_api_version
        except grpc.RpcError as e:
            raise self._rpc_error("Capabilities", e) from None

    # --- packet I/O ------------------------------------------------------------------------

    def packet_out(self, payload: bytes, **metadata: Value) -> None:
        """Send a packet to the switch's CPU port with packet_out metadata (e.g. egress_port=3).
        P4RuntimeError when `packet_backlog` packet-outs already wait for the stream (a switch or a
        gRPC thread that does not keep up): the caller learns it at once, and memory does not grow."""
        header = self.require_p4info().packet_metadata("packet_out")
        if self._stub is None:
            raise P4RuntimeError(f"{self.name}: not connected to {self.address}")
        if self._requests.qsize() >= self.packet_backlog:
            self.packets_refused += 1
            raise P4RuntimeError(f"{self.name}: {self.packet_backlog} packet-outs already queued on the stream to "
                                 f"{self.address}; this one is not sent")
        msg = p4runtime_pb2.StreamMessageRequest()
        msg.packet.payload = payload
        for name, value in metadata.items():
            f = header.field(name)
            msg.packet.metadata.add(metadata_id=f.id, value=codec.encode_value(value, f.bitwidth, f"packet_out {name}"))
        self._requests.put(msg)

    def packets_in(self, timeout: float = 1.0) -> Iterator[PacketIn]:
        """Packets received on the stream; stops after `timeout` seconds without one."""
        header = self.require_p4info().packet_metadata("packet_in")
        names = {f.id: f.name for f in header.fields}
        while True:
            try:
                packet, received_ns = self._packets.get(timeout=timeout)
            except queue.Empty:
                return
            meta = tuple((names.get(m.metadata_id, str(m.metadata_id)), codec.decode_value(m.value)) for m in packet.metadata)
            yield PacketIn(packet.payload, meta, received_ns)


def _update_errors(error: grpc.RpcError, batch: list[Update | tuple[str, Entity]]) -> list[UpdateError]:
    """Per-update errors from a failed Write: p4.v1.Error details (PI style), else the call's status for all."""
    updates = [Update(_UPDATE_TYPES[kind], entity) for kind, entity in batch]  # kinds checked by write()
    status = status_pb2.Status()
    for key, value in error.trailing_metadata() or ():
        if key == _STATUS_DETAILS_KEY:
            status.ParseFromString(value)
    details = []
    for any_msg in status.details:
        err = p4runtime_pb2.Error()
        if any_msg.Unpack(err):
            details.append(err)
    if len(details) == len(updates):
        return [
            UpdateError(u, code_pb2.Code.Name(d.canonical_code), d.message)
            for u, d in zip(updates, details)
            if d.canonical_code != code_pb2.OK
        ]
    return [UpdateError(u, error.code().name, error.details() or "") for u in updates]
