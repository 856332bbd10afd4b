"""Import Mininet, also from an interpreter other than the one Debian's `mininet` package is built for.

Debian installs Mininet's Python package for Debian's own python3 only
(/usr/lib/python3/dist-packages/mininet). A virtualenv or pyenv interpreter cannot import it, so
`load()` imports the package from there by file location: only the `mininet` package is made
importable, not the rest of Debian's dist-packages (whose builds may not suit this interpreter).
`mnexec`, which Mininet runs to put hosts in namespaces, comes from the same Debian package.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

DEBIAN_PACKAGE = "mininet"
DEBIAN_DIRS = (Path("/usr/lib/python3/dist-packages"), Path("/usr/local/lib/python3/dist-packages"))


class MininetMissing(ImportError):
    """Mininet cannot be imported or mnexec is absent; the message names the Debian package."""


def _from_debian() -> ModuleType | None:
    """Import the mininet package from a Debian dist-packages directory, registering it as `mininet`."""
    for base in DEBIAN_DIRS:
        init = base / "mininet" / "__init__.py"
        if not init.is_file():
            continue
        spec = importlib.util.spec_from_file_location("mininet", init, submodule_search_locations=[str(init.parent)])
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules["mininet"] = module
        try:
            spec.loader.exec_module(module)
        except Exception:
            sys.modules.pop("mininet", None)
            raise
        return module
    return None


def load() -> ModuleType:
    """The `mininet` package (the installed one, else Debian's); MininetMissing if neither exists."""
    try:
        module = importlib.import_module("mininet")
    except ImportError:
        try:
            found = _from_debian()
        except Exception as e:  # a Debian build that this interpreter cannot run
            raise MininetMissing(f"Mininet from Debian's package '{DEBIAN_PACKAGE}' does not import into "
                                 f"{sys.executable}: {type(e).__name__}: {e}") from e
        if found is None:
            raise MininetMissing(f"Mininet is not installed: install Debian's package '{DEBIAN_PACKAGE}' "
                                 f"(apt-get install {DEBIAN_PACKAGE})") from None
        module = found
    # The submodules the lab uses; importing them here surfaces a broken install at once.
    for name in ("net", "node", "link", "topo", "cli", "log", "clean", "util"):
        importlib.import_module(f"mininet.{name}")
    return module


def missing() -> str | None:
    """None when Mininet imports and mnexec is on PATH, else why not (a skip or error reason)."""
    try:
        load()
    except MininetMissing as e:
        return str(e)
    if shutil.which("mnexec") is None:
        return f"mnexec not found on PATH (it comes with Debian's package '{DEBIAN_PACKAGE}')"
    if shutil.which("ifconfig") is None:  # Mininet's Node checks for it and calls exit(1) when it is absent
        return "ifconfig not found on PATH, which Mininet needs (Debian's net-tools, in /usr/sbin: a PATH without it?)"
    return None
