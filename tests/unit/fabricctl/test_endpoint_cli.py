"""fabricctl endpoint compare: its arguments checked (one error line, exit 2) before any lab is reached."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fabricctl import options
from fabricctl.main import cli
from tests.unit.usage import says

UNSET = {name: None for _, name, _ in options.GLOBALS.values()}


def run(*args: str) -> Result:
    return CliRunner(env=UNSET).invoke(cli, list(args), prog_name="fabricctl")


@pytest.mark.parametrize("args, message", [
    (["incast"], ("T0 T1 | HOST",)),
    (["incast", "h2", "h3"], ("error: incast takes one host, got 2 arguments",)),
    (["cut", "p0-t0-0"], ("error: cut takes two switches, T0 and T1, got 1 argument",)),
    (["incast", "h2", "--modes", "host,leaf-spray"], ("error: unknown mode 'leaf-spray' (known: host, host-trim, leaf, "
                                                      "leaf-trim)",)),
    (["cut", "p0-t0-0", "p0-t1-0", "--modes", "host-trim"],
     ("error: unknown mode 'host-trim' (known: leaf, leaf-unattended, host,",)),
    (["cut", "p0-t0-0", "p0-t1-0", "--modes", "host,roce"],
     ("error: unknown mode 'roce' (known: leaf, leaf-unattended, host, host-spray, host-ethereal, host-hash, "
      "roce-gbn)",)),
    (["incast", "h2", "--ecn-at", "8"], ("error: --ecn-at (8) must be below --trim-at (8)",)),
    (["cut", "p0-t0-0", "p0-t1-0", "--fault-at", "3", "--repair-at", "2", "--seconds", "4"],
     ("error: need 0 < --fault-at (3.0) < --repair-at (2.0) < --seconds (4.0)",)),
    (["incast", "h2", "--bottleneck-pps", "0"], ("--bottleneck-pps", "0")),  # click's range check
    (["incast", "h2", "--queue-depth", "5000"], ("--queue-depth", "5000")),
])
def test_endpoint_compare_checks_its_arguments_before_touching_a_lab(tmp_path: Path, args,
                                                                     message: tuple[str, ...]) -> None:
    result = run("endpoint", "compare", *args, "--dir", str(tmp_path / "nolab"))
    assert result.exit_code == 2, result.output
    says(result.stderr, *message)
    assert not (tmp_path / "nolab").exists()
