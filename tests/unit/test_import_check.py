"""The import layering check CI runs (.ci/import_check.py), on small trees written here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.paths import REPO


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_check", REPO / ".ci" / "import_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_check"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


check = _checker()


def _tree(root: Path, files: dict[str, str]) -> Path:
    """The four packages (empty __init__) and `files` (path -> source) under root."""
    for package in check.LAYERS:
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def _findings(root: Path, limit: int = check.MAX_LINES) -> list[str]:
    findings, _ = check.check(root, limit=limit)
    return [str(f) for f in findings]


def test_a_tree_that_keeps_the_layers_passes(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "controller/plan.py": "import os\n",
        "controller/sub/__init__.py": "",
        "controller/sub/wire.py": "from ..plan import x\n",  # relative, within the layer
        "mininet_labs/lab.py": "from controller.plan import x\nimport controller.sub.wire\n",
        "endpoint/host.py": "from mininet_labs import lab\n",
        "fabricctl/main.py": "from endpoint.host import y\nfrom controller import plan\n",
    })
    findings, summary = check.check(root)
    assert findings == []
    # `from controller import plan` imports the package (its __init__ runs) and the module: two imports
    assert summary.startswith("10 modules, 8 imports between them; layers controller < mininet_labs < endpoint < fabricctl")
    assert check.main(["import_check.py", str(root)]) == 0


def test_each_upward_import_is_named_with_the_importer(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "controller/plan.py": "def f():\n    from fabricctl import main\n",  # inside a function counts too
        "controller/sub/__init__.py": "",
        "controller/sub/view.py": "from ...mininet_labs import lab\n",  # relative, out of the layer
        "mininet_labs/lab.py": "import endpoint.host\n",
        "endpoint/host.py": "from fabricctl.main import cli\n",
        "fabricctl/main.py": "",
    })
    assert _findings(root) == [
        "upward: controller.plan -> fabricctl",  # the package: its __init__ runs
        "upward: controller.plan -> fabricctl.main",
        "upward: controller.sub.view -> mininet_labs",
        "upward: controller.sub.view -> mininet_labs.lab",
        "upward: endpoint.host -> fabricctl.main",
        "upward: mininet_labs.lab -> endpoint.host",
    ]


def test_a_cycle_is_named_once_with_every_module_in_it(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "controller/a.py": "from controller import b\n",
        "controller/b.py": "import controller.c\n",
        "controller/c.py": "from controller.a import thing\n",
        "controller/d.py": "from controller import a\n",  # imports the cycle, is not in it
    })
    assert _findings(root) == ["cycle: controller.a -> controller.b -> controller.c -> controller.a"]


def test_a_module_over_the_limit_is_named_with_its_length(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, {"mininet_labs/long.py": "x = 1\n" * 11, "mininet_labs/short.py": "x = 1\n" * 10})
    assert _findings(root, limit=10) == ["size: mininet_labs.long has 11 lines (over 10)"]
    assert check.main(["import_check.py", str(root)]) == 0  # the real limit: 600
    (root / "mininet_labs" / "long.py").write_text("x = 1\n" * 601)
    assert check.main(["import_check.py", str(root)]) == 1
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "size: mininet_labs.long has 601 lines (over 600)",
        "import check: 6 modules, 0 imports between them; layers controller < mininet_labs < endpoint < fabricctl; "
        "at most 600 lines a module: 1 findings",
    ]


def test_the_repository_passes() -> None:
    findings, _ = check.check(REPO)
    assert [str(f) for f in findings] == []
