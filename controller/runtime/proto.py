"""The P4Runtime, P4Info and google.rpc protobuf bindings the project uses, and where they come from.

Every module imports them from here (`from controller.runtime.proto import p4runtime_pb2, ...`), never
from `p4.v1`, `p4.config.v1` or `google.rpc` directly. They come from finsy (PyPI `finsy`, its
`finsy.proto` package): code generated for protobuf 6, which loads on protobuf's C core (upb). The
`p4runtime` PyPI package is not used: its 1.6.0 ships generated code of the old style that upb refuses
("Descriptors cannot be created directly"), and its 1.4.1 pins protobuf 3. Importing `finsy.proto`
runs `finsy/__init__.py` (finsy's whole asyncio client: about 50 more modules, same import time and
RSS as the pure-Python bindings of protobuf 3.20 it replaces; see docs/shell.md).
"""

from __future__ import annotations

from finsy.proto.google.rpc import code_pb2, status_pb2
from finsy.proto.p4.config.v1 import p4info_pb2
from finsy.proto.p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from google.protobuf import __version__ as protobuf_version
from google.protobuf.internal import api_implementation

__all__ = ["code_pb2", "status_pb2", "p4info_pb2", "p4runtime_pb2", "p4runtime_pb2_grpc", "implementation",
           "protobuf_version"]


def implementation() -> str:
    """protobuf's implementation in this process: "upb" (the C core) unless
    PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python chose the pure-Python one."""
    return api_implementation.Type()
