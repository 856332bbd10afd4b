"""Locating the P4 toolchain (p4c, simple_switch_grpc) and the committed compiler output."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from controller.plan.p4names import Program

REPO_ROOT = Path(__file__).resolve().parents[2]
P4_DIR = REPO_ROOT / "p4"
BUILD_DIR = P4_DIR / "build"
# The programs compiled into p4/build/: the fabric's two and the plain IPv6 router the data plane benches compare with.
P4Program = Literal[Program, "l3_baseline"]
PROGRAMS: tuple[P4Program, ...] = ("srv6_spray", "eecmp_qp_hash", "l3_baseline")

# Environment variables that name a binary directly; P4_TOOLCHAIN_BIN names a directory.
_ENV = {"p4c": "P4C", "simple_switch_grpc": "SIMPLE_SWITCH_GRPC"}


def find_binary(name: str) -> str | None:
    """Path of a toolchain binary: $P4C/$SIMPLE_SWITCH_GRPC, then $P4_TOOLCHAIN_BIN, then PATH."""
    env_name = _ENV.get(name)
    if env_name and os.environ.get(env_name):
        path = os.environ[env_name]
        return path if os.access(path, os.X_OK) else None
    bin_dir = os.environ.get("P4_TOOLCHAIN_BIN")
    if bin_dir:
        candidate = Path(bin_dir) / name
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


@dataclass(frozen=True)
class Artifacts:
    """The committed compiler output of one program: bmv2 JSON and P4Info text."""

    program: P4Program
    bmv2_json: Path
    p4info: Path

    @classmethod
    def of(cls, program: str, build_dir: Path = BUILD_DIR) -> "Artifacts":
        """The artifacts of `program` (a name as given: checked here); ValueError, one line, for an unknown one."""
        return cls(p4_program(program), build_dir / f"{program}.json", build_dir / f"{program}.p4info.txtpb")


def p4_program(name: str) -> P4Program:
    """`name` as one of the project's P4 programs; ValueError, one line, if it is none."""
    for program in PROGRAMS:
        if program == name:
            return program
    raise ValueError(f"unknown P4 program {name!r}; known: {', '.join(PROGRAMS)}")
