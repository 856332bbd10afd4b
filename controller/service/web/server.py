"""The live view's HTTP server (standard library, read-only): the page, its JSON and a server-sent event
stream of the controller's events and of each change to the fabric's state, read from the fabric's store."""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
import time
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from controller.service.web.view import Snapshots, Sources
from controller.state.store import StoreError

STATIC = {"/": ("index.html", "text/html; charset=utf-8"), "/app.js": ("app.js", "text/javascript; charset=utf-8"),
          "/style.css": ("style.css", "text/css; charset=utf-8")}
BACKLOG = 100  # events a new stream starts with (the page's history)
MAX_STREAMS = 32  # event streams open at once (each holds a thread)
KEEPALIVE = 10.0  # seconds between comment lines on an idle stream
POLL = 0.2  # seconds between looks at the store (the state, status and events files, or etcd)
REBUILD = 2.0  # seconds after which the snapshot is rebuilt even if no file changed (a controller that died)
HEADERS = {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'",
           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
           "X-Frame-Options": "DENY"}


class ListenError(ValueError):
    """A listen address that is malformed, or not loopback without --allow-remote (one line)."""


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT or [V6]:PORT -> (host, port); ListenError otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ListenError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9400")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenError(f"--listen {text!r}: the port must be 0..65535 (0: any free port)")
    return host, int(port)


def resolve(host: str, port: int) -> tuple[socket.AddressFamily, str, bool]:
    """The address family and address to bind, and whether every address `host` names is loopback."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ListenError(f"--listen {host}: cannot resolve it: {e.strerror}") from None
    loopback = all(ipaddress.ip_address(i[4][0].split("%")[0]).is_loopback for i in infos)
    family, addr = infos[0][0], infos[0][4][0]
    return family, addr, loopback


def sse(event: str, data: Any, event_id: str | None = None) -> bytes:
    """One server-sent event (HTML Living Standard 9.2): `id:`, `event:`, one `data:` line per line of the JSON."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"), default=str)
    out = [f"id: {event_id}"] if event_id is not None else []
    out.append(f"event: {event}")
    out.extend(f"data: {line}" for line in text.split("\n"))
    return ("\n".join(out) + "\n\n").encode()


class Hub:
    """The latest snapshot and its version; one thread rebuilds it when the store's record or view changes (a
    store that cannot tell cheaply, etcd, is read every POLL)."""

    def __init__(self, snapshots: Snapshots) -> None:
        self.snapshots = snapshots
        self.changed = threading.Condition()
        self.version = 0
        self.latest: dict[str, Any] = snapshots.snapshot()
        self.stopping = threading.Event()
        self._key: Any = None
        self._thread = threading.Thread(target=self._loop, name="web-hub", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        with self.changed:
            self.changed.notify_all()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        store = self.snapshots.store
        built = time.monotonic()
        while not self.stopping.wait(POLL):
            key = store.change_token()
            if key is not None and key == self._key and time.monotonic() - built < REBUILD:
                continue
            self._key, built = key, time.monotonic()
            snap = self.snapshots.snapshot()
            if _same(snap, self.latest):
                continue
            with self.changed:
                self.latest = snap
                self.version += 1
                self.changed.notify_all()


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two snapshots that differ only in when they were taken."""
    return {**a, "time": 0} == {**b, "time": 0}


class Handler(BaseHTTPRequestHandler):
    """GET and HEAD only: the page, /api/layout, /api/snapshot, /api/events?last=N, /events (SSE)."""

    server: WebServer
    protocol_version = "HTTP/1.1"
    server_version = "fabricctl-web"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass

    def _host_ok(self) -> bool:
        """A loopback server answers only requests addressed to a loopback name (no DNS rebinding)."""
        if not self.server.loopback_only:
            return True
        host = (self.headers.get("Host") or "").strip().lower()
        name = host.rsplit(":", 1)[0] if not host.startswith("[") else host[1:host.find("]")]
        if name == "localhost":
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def do_HEAD(self) -> None:
        self._get(body=False)

    def do_GET(self) -> None:
        self._get(body=True)

    def _refuse(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"read-only: GET and HEAD only\n", "text/plain; charset=utf-8",
                   extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

    def _send(self, status: HTTPStatus, data: bytes, ctype: str, body: bool = True,
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in {**HEADERS, **(extra or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _json(self, doc: Any, body: bool) -> None:
        self._send(HTTPStatus.OK, json.dumps(doc, default=str).encode(), "application/json", body)

    def _get(self, body: bool) -> None:
        if not self._host_ok():
            self._send(HTTPStatus.MISDIRECTED_REQUEST, b"this server answers loopback names only\n",
                       "text/plain; charset=utf-8", body)
            return
        url = urlsplit(self.path)
        if url.path in STATIC:
            name, ctype = STATIC[url.path]
            self._send(HTTPStatus.OK, resources.files(__package__).joinpath(name).read_bytes(), ctype, body)
        elif url.path == "/api/layout":
            self._json(self.server.hub.snapshots.layout, body)
        elif url.path == "/api/snapshot":
            self._json(self.server.hub.snapshots.snapshot(), body)
        elif url.path == "/api/events":
            try:
                last = max(0, min(10000, int(parse_qs(url.query).get("last", [str(BACKLOG)])[0])))
            except ValueError:
                self._send(HTTPStatus.BAD_REQUEST, b"last: expected a number\n", "text/plain; charset=utf-8", body)
                return
            events, _ = read_events(self.server.hub, None, last) if last else ([], 0)
            self._json([e for _, e in events], body)
        elif url.path == "/events":
            self._stream(body)
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8", body)

    def _stream(self, body: bool) -> None:
        if not self.server.streams.acquire(blocking=False):
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, b"too many event streams open\n", "text/plain; charset=utf-8",
                       body, extra={"Retry-After": "5"})
            return
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            for k, v in HEADERS.items():
                self.send_header(k, v)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            if not body:
                return
            for chunk in stream(self.server.hub, self.headers.get("Last-Event-ID")):
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self.server.streams.release()


def read_events(hub: Hub, after: int | None, limit: int = BACKLOG) -> tuple[list[tuple[int, dict[str, Any]]], int | None]:
    """The store's events after cursor `after` (None: the last `limit`); none while the store cannot be read."""
    try:
        return hub.snapshots.store.events_since(after, limit)
    except StoreError:
        return [], after


def stream(hub: Hub, last_event_id: str | None = None, keepalive: float = KEEPALIVE) -> Iterator[bytes]:
    """The chunks of one event stream: a retry hint and the snapshot, then each controller event (`fabric`,
    its id the store's cursor after it: the events file's offset, or the event's etcd revision, so a
    reconnecting page resumes there) and each new snapshot."""
    with hub.changed:
        version, snap = hub.version, hub.latest
    where = snap["events_file"]
    try:
        cursor: int | None = int(last_event_id) if last_event_id is not None else None
    except ValueError:
        cursor = None
    yield b"retry: 2000\n\n"
    yield sse("snapshot", snap)
    quiet_since = time.monotonic()
    while not hub.stopping.is_set():
        if snap["events_file"] != where:  # another controller, another events file
            where, cursor = snap["events_file"], None
        events, cursor = read_events(hub, cursor)
        for pos, event in events:
            yield sse("fabric", event, str(pos))
        with hub.changed:
            if hub.version == version:
                hub.changed.wait(POLL)
            fresh = hub.version != version
            version, snap = hub.version, hub.latest
        if fresh:
            yield sse("snapshot", snap)
        if events or fresh:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= keepalive:
            yield b": keep-alive\n\n"
            quiet_since = time.monotonic()


class WebServer(ThreadingHTTPServer):
    """The live view on one address; `serve()` in a thread, `close()` to stop (event streams end too)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, sources: Sources, host: str, port: int, allow_remote: bool = False) -> None:
        family, addr, loopback = resolve(host, port)
        if not loopback and not allow_remote:
            raise ListenError(f"--listen {host}:{port} is not a loopback address: the page shows the whole fabric to "
                              "whoever reaches it (give --allow-remote to mean it)")
        self.address_family = family
        self.loopback_only = loopback
        self.hub = Hub(Snapshots(sources))
        self.streams = threading.BoundedSemaphore(MAX_STREAMS)
        super().__init__((addr, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else str(host)
        return f"http://{host}:{port}/"

    def start(self) -> None:
        self.hub.start()
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.2}, name="web", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.hub.stop()
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
