"""Compiling the project's P4 programs with p4c into the committed artifacts (bmv2 JSON, P4Info)."""

from __future__ import annotations

import os
import shutil
import sys
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from controller.programs.toolchain import BUILD_DIR, P4_DIR, PROGRAMS, REPO_ROOT, Artifacts, P4Program, find_binary


class CompileError(RuntimeError):
    """p4c failed or is missing."""


@dataclass(frozen=True)
class CompileResult:
    """Where one program's artifacts were written, and what p4c said."""

    artifacts: Artifacts
    warnings: str


def bmv2_backend() -> str:
    """p4c's bmv2 simple_switch backend (p4c-bm2-ss), found beside p4c or on PATH.

    The backend is called directly rather than through the p4c driver: the driver
    preprocesses into a temporary file whose name would end up in the bmv2 JSON.
    """
    p4c = find_binary("p4c")
    if p4c is not None and (Path(p4c).resolve().parent / "p4c-bm2-ss").exists():
        return str(Path(p4c).resolve().parent / "p4c-bm2-ss")
    backend = shutil.which("p4c-bm2-ss")
    if backend is None:
        raise CompileError("p4c not found (PATH, $P4C or $P4_TOOLCHAIN_BIN)")
    return backend


def compile_program(program: P4Program, out_dir: Path = BUILD_DIR) -> CompileResult:
    """Run p4c's bmv2 backend (v1model) on p4/<program>.p4, writing <program>.json and .p4info.txtpb.

    p4c runs from the repository root on relative paths, so the source references in
    the bmv2 JSON do not depend on where the repository is checked out.
    """
    compiler = bmv2_backend()
    artifacts = Artifacts.of(program, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    source = (P4_DIR / f"{program}.p4").relative_to(REPO_ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [compiler, "--arch", "v1model", "--std", "p4-16",
               "-o", str(Path(tmp) / f"{program}.json"),
               "--p4runtime-files", str(Path(tmp) / f"{program}.p4info.txtpb"), str(source)]
        proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"p4c failed on {source}:\n{proc.stderr.strip()}")
        outputs = {Path(tmp) / f"{program}.json": artifacts.bmv2_json,
                   Path(tmp) / f"{program}.p4info.txtpb": artifacts.p4info}
        missing = [src.name for src in outputs if not src.is_file() or src.stat().st_size == 0]
        if missing:
            raise CompileError(f"p4c exited 0 on {source} but did not write {' and '.join(missing)}: "
                               f"nothing in {out_dir} was replaced")
        _install(outputs)
    return CompileResult(artifacts, proc.stderr.strip())


def _install(outputs: dict[Path, Path]) -> None:
    """Put every output in place or none: each is first copied beside its target (a hidden temporary
    file), and only when all copies exist are they renamed over the targets."""
    staged: list[tuple[Path, Path]] = []
    try:
        for src, dest in outputs.items():
            tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
            shutil.copyfile(src, tmp)
            staged.append((tmp, dest))
        for tmp, dest in staged:
            os.replace(tmp, dest)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)


def compile_all(out_dir: Path = BUILD_DIR) -> list[CompileResult]:
    """Compile every program of the project."""
    return [compile_program(program, out_dir) for program in PROGRAMS]


def main() -> int:
    """`python3 -m controller.programs.p4compile`: regenerate p4/build/ from p4/*.p4."""
    try:
        for result in compile_all():
            print(f"{result.artifacts.program}: {result.artifacts.bmv2_json.name}, "
                  f"{result.artifacts.p4info.name}")
    except CompileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
