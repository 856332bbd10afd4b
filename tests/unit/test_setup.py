"""The README's set-up is what CI runs, and requirements.lock is the dependency set pyproject.toml asks for."""

from __future__ import annotations

from tests.paths import REPO

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name



def _quickstart() -> list[str]:
    """The commands of the README's Quickstart block (comments and blank lines left out)."""
    text = (REPO / "README.md").read_text()
    block = text.split("## Quickstart", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def _locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of every pin in requirements.lock."""
    pins: dict[str, tuple[str, list[str]]] = {}
    for entry in re.split(r"\n(?=\S)", (REPO / "requirements.lock").read_text()):
        head = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", entry)
        if head:
            pins[canonicalize_name(head[1])] = (head[2], re.findall(r"--hash=sha256:([0-9a-f]{64})", entry))
    return pins


def test_ci_runs_the_readmes_commands_verbatim() -> None:
    setup, test = _quickstart()  # two commands: set-up and the main job, then the tests
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert setup in ci and "--require-hashes -r requirements.lock" in setup
    assert setup.endswith(" && .venv/bin/fabricctl lab demo")
    assert any(line.startswith(f'run_pytest "locked run" {test.split(" -m pytest")[0]}') for line in ci), test
    assert test == ".venv/bin/python -m pytest"


def test_the_lock_pins_every_dependency_within_pyprojects_ranges_with_hashes() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in (*project["dependencies"], *project["optional-dependencies"]["test"])]
    pins = _locked()
    outside = [f"{r} (locked {pins[canonicalize_name(r.name)][0]})" for r in wanted
               if canonicalize_name(r.name) in pins
               and not r.specifier.contains(pins[canonicalize_name(r.name)][0], prereleases=True)]
    absent = [str(r) for r in wanted if canonicalize_name(r.name) not in pins]
    assert (absent, outside) == ([], []), "refresh the lock: .ci/lock"
    assert all(hashes for _, hashes in pins.values()), [n for n, (_, h) in pins.items() if not h]
