"""The P4Runtime, P4Info and google.rpc protobuf bindings the project uses, and where they come from.

Every module imports them from here (`from controller.runtime.proto import p4runtime_pb2, ...`), never
from `p4.v1`, `p4.config.v1` or `google.rpc` directly. They come from finsy (PyPI `finsy`, its
`finsy.proto` package): code generated for protobuf 6, which loads on protobuf's C core (upb). The
`p4runtime` PyPI package is not used: its 1.6.0 ships generated code of the old style that upb refuses
("Descriptors cannot be created directly"), and its 1.4.1 pins protobuf 3.

The modules are finsy's files, loaded as the package `controller.runtime._finsy_proto` rather than
imported as `finsy.proto`: that import runs `finsy/__init__.py` and `finsy/proto/__init__.py`, i.e.
finsy's whole asyncio client and its gNMI, Stratum and p4testgen bindings (about 40 more modules,
0.3-0.5 s and 2.5-3 MB of RSS in every `fabricctl` process), none of which the controller uses. The
generated modules import each other relatively, so they load the same under either name; protobuf
sees the same files (its names are the .proto ones, not the Python module's).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING

from google.protobuf import __version__ as protobuf_version
from google.protobuf.internal import api_implementation

_PACKAGE = __name__.rpartition(".")[0] + "._finsy_proto"


def _bindings(*names: str) -> list[types.ModuleType]:
    """finsy's generated modules `names` (dotted, under finsy/proto), without running finsy's __init__ files."""
    package = sys.modules.get(_PACKAGE)
    if package is None:
        spec = importlib.util.find_spec("finsy")  # finds the package, does not run it
        if spec is None or spec.origin is None:
            raise ImportError("the P4Runtime bindings come from finsy: pip install finsy (see requirements.lock)")
        package = types.ModuleType(_PACKAGE, "finsy's generated protobuf modules (finsy/proto), loaded without finsy")
        package.__path__ = [str(Path(spec.origin).parent / "proto")]
        package.__package__ = _PACKAGE
        sys.modules[_PACKAGE] = package
    return [importlib.import_module(f"{_PACKAGE}.{name}") for name in names]


if TYPE_CHECKING:  # the same files, as type checkers know them
    from finsy.proto.google.rpc import code_pb2, status_pb2
    from finsy.proto.p4.config.v1 import p4info_pb2
    from finsy.proto.p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
else:
    code_pb2, status_pb2, p4info_pb2, p4runtime_pb2, p4runtime_pb2_grpc = _bindings(
        "google.rpc.code_pb2", "google.rpc.status_pb2", "p4.config.v1.p4info_pb2", "p4.v1.p4runtime_pb2",
        "p4.v1.p4runtime_pb2_grpc")

__all__ = ["code_pb2", "status_pb2", "p4info_pb2", "p4runtime_pb2", "p4runtime_pb2_grpc", "implementation",
           "protobuf_version"]


def implementation() -> str:
    """protobuf's implementation in this process: "upb" (the C core) unless
    PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python chose the pure-Python one."""
    return api_implementation.Type()
