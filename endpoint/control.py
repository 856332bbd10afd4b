"""The controller's channel to a running endpoint sender: one JSON request and one JSON answer per connection on a
Unix stream socket (a path on the shared filesystem, so it reaches a sender inside a lab host's namespace).

    python3 -m endpoint send ... --control /tmp/lab/endpoint/RUN/control-h0.sock
    request("/tmp/lab/endpoint/RUN/control-h0.sock", {"op": "deny", "dst": "h2", "evs": [1]})

Requests and answers are SenderCore.control's: query, deny, set_state (MODIFY_EV_STATE), replace (REPLACE_EV).
"""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_REQUEST = 1 << 16


class ControlError(Exception):
    """The sender could not be asked (no socket, no answer, a bad answer): one line."""


class ControlSocket:
    """The sender's end: `serve(handler)` answers the connections waiting now, never blocking for long."""

    def __init__(self, path: str, client_timeout: float = 0.05) -> None:
        self.path = path
        p = Path(path)
        if p.is_symlink() or (p.exists() and not stat.S_ISSOCK(p.stat().st_mode)):
            raise ValueError(f"{path} exists and is not a socket: not replaced")
        if p.exists():
            p.unlink()  # a socket a previous sender left
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.sock.setblocking(False)
        self.client_timeout = client_timeout
        self._ino = os.stat(path).st_ino

    def serve(self, handler: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
        """Answer every connection waiting; how many were answered."""
        n = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return n
            with conn:
                conn.settimeout(self.client_timeout)
                try:
                    data = _read_line(conn)
                    try:
                        req = json.loads(data)
                        answer = handler(req) if isinstance(req, dict) else {"error": "a request is a JSON object"}
                    except json.JSONDecodeError as e:
                        answer = {"error": f"the request is not JSON: {e}"}
                    conn.sendall(json.dumps(answer).encode() + b"\n")
                    n += 1
                except OSError:
                    continue  # the client went away or was too slow: the sender goes on

    def close(self) -> None:
        self.sock.close()
        try:
            if os.stat(self.path).st_ino == self._ino:  # ours, not a later sender's
                os.unlink(self.path)
        except OSError:  # already gone, or never ours to remove: nothing of ours is left either way
            pass


def _read_line(conn: socket.socket) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            break
        buf += chunk
        if len(buf) > MAX_REQUEST:
            raise OSError("request too long")
    return buf


def request(path: str | Path, req: dict[str, Any], timeout: float = 2.0) -> dict[str, Any]:
    """Ask the sender at `path`; its answer (ControlError when it cannot be asked)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(path))
            s.sendall(json.dumps(req).encode() + b"\n")
            data = _read_line(s)
        except FileNotFoundError:
            raise ControlError(f"no endpoint sender listens at {path}") from None
        except (ConnectionRefusedError, socket.timeout, OSError) as e:
            raise ControlError(f"the endpoint sender at {path} did not answer: {e}") from None
    try:
        answer = json.loads(data)
    except json.JSONDecodeError:
        raise ControlError(f"the endpoint sender at {path} gave no JSON answer") from None
    if not isinstance(answer, dict):
        raise ControlError(f"the endpoint sender at {path} gave no JSON object")
    return answer
