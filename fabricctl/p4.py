"""`fabricctl p4 compile`: the project's P4 programs into the committed artifacts."""

from __future__ import annotations

from pathlib import Path

import click

from controller import exitcodes
from controller.exitcodes import OpError
from controller.programs.toolchain import BUILD_DIR, PROGRAMS, P4Program
from fabricctl.context import _json_option, _print_json


@click.group()
def p4() -> None:
    """The P4 programs: compile them with p4c into p4/build/.

    \b
    Example:
      fabricctl p4 compile srv6_spray
    """


@p4.command("compile")
@click.argument("programs", metavar="[PROGRAM]...", nargs=-1, type=click.Choice(PROGRAMS))
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=BUILD_DIR,
              show_default="p4/build", help="Where the bmv2 JSON and P4Info go.")
@_json_option
def p4_compile(programs: tuple[P4Program, ...], out_dir: Path, as_json: bool) -> None:
    """Compile P4 programs (all by default) with p4c's bmv2 backend into bmv2 JSON and P4Info.

    p4c is found through $P4C, $P4_TOOLCHAIN_BIN or PATH; without it, exit 5.

    \b
    Examples:
      fabricctl p4 compile
      fabricctl p4 compile srv6_spray --out-dir /tmp/build
    """
    from controller.programs.p4compile import CompileError, compile_program

    if out_dir.exists() and not out_dir.is_dir():  # click checks only what it can stat as a regular file
        raise OpError(f"--out-dir: {out_dir} exists and is not a directory", exitcodes.BAD_INPUT)
    done = []
    for program in programs or PROGRAMS:
        try:
            result = compile_program(program, out_dir)
        except CompileError as e:
            first, _, rest = str(e).partition("\n")
            raise OpError(first, exitcodes.TOOLCHAIN, rest) from None
        done.append(result)
        if not as_json:
            click.echo(f"{program}: {result.artifacts.bmv2_json}, {result.artifacts.p4info}")
    if as_json:
        _print_json({r.artifacts.program: {"bmv2_json": str(r.artifacts.bmv2_json), "p4info": str(r.artifacts.p4info),
                                           "warnings": r.warnings} for r in done})
