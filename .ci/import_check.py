#!/usr/bin/env python3
"""The import layering docs/architecture.md states, checked from the source (AST; nothing is imported).

    .ci/import_check.py [REPO]

Fails (exit 1, one line per finding) on:
- an import cycle between modules of the four packages;
- an upward import: a package importing one of a higher layer (LAYERS, lowest first: the controller
  library, the labs, the endpoint, the CLI); an import inside a function counts like one at the top;
- a module over MAX_LINES lines.
Prints one summary line when the tree passes.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

LAYERS = ("controller", "mininet_labs", "endpoint", "fabricctl")  # lowest first: each may import those before it
MAX_LINES = 600


@dataclass(frozen=True)
class Finding:
    """One breach of the layering: its kind ("cycle", "upward", "size") and what it is about."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def modules(repo: Path, packages: tuple[str, ...] = LAYERS) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the packages (a package's __init__ is the package)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((repo / package).rglob("*.py")):
            parts = path.relative_to(repo).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: set[str] | dict[str, Path]) -> set[str]:
    """The modules of `known` that module `name` (at `path`) imports: `from a import b` counts as a.b when that
    is a module, else as a; relative imports are resolved against the module's package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def upward(edges: dict[str, set[str]], layers: tuple[str, ...] = LAYERS) -> list[str]:
    """`a -> b` for every import of a module of a higher layer than the importer's."""
    rank = {package: n for n, package in enumerate(layers)}
    return sorted(f"{m} -> {t}" for m, targets in edges.items() for t in targets
                  if rank.get(t.split(".")[0], -1) > rank.get(m.split(".")[0], len(layers)))


def oversized(found: dict[str, Path], limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """(module, lines) of every module over `limit` lines, the longest first."""
    sizes = ((m, len(p.read_text(encoding="utf-8").splitlines())) for m, p in found.items())
    return sorted(((m, n) for m, n in sizes if n > limit), key=lambda mn: (-mn[1], mn[0]))


def check(repo: Path, layers: tuple[str, ...] = LAYERS, limit: int = MAX_LINES) -> tuple[list[Finding], str]:
    """The findings for the tree at `repo`, and a one-line summary of what was looked at."""
    found = modules(repo, layers)
    edges = {m: imports(m, p, found) for m, p in found.items()}
    findings = [Finding("cycle", " -> ".join([*c, c[0]])) for c in cycles(edges)]
    findings += [Finding("upward", u) for u in upward(edges, layers)]
    findings += [Finding("size", f"{m} has {n} lines (over {limit})") for m, n in oversized(found, limit)]
    summary = (f"{len(found)} modules, {sum(map(len, edges.values()))} imports between them; layers "
               f"{' < '.join(layers)}; at most {limit} lines a module")
    return findings, summary


def main(argv: list[str]) -> int:
    repo = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parents[1])
    findings, summary = check(repo)
    for finding in findings:
        print(finding)
    print(f"import check: {summary}: " + (f"{len(findings)} findings" if findings else "passes"))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
