"""A small AST mutation runner: real mutants of one module run against chosen unit test files.

usage (from the checkout, see docs/mutation.md):
    nice -n 19 .venv/bin/python bench/mutation.py MODULE_FILE MODULE_NAME OUT.json TEST_FILE... [--timeout S] [--only N,N]

Operators: comparisons flipped (< <=, == !=, in / not in, is / is not), and <-> or, + <-> -, * <-> //, / -> *,
<< <-> >>, | <-> &, ^ -> |, `not` and unary minus dropped, int and float constants +1, True <-> False,
`return X` -> `return None`, `if X` -> `if not X`. Annotations, imports and docstrings are left alone.

Each mutant is served from memory by a meta-path finder in a forked child (the file on disk is never
touched), and the child runs pytest -x on the test files; exit 0 = survived, non-zero = killed,
no exit within the timeout = timeout. MUTATION_LOGS=DIR keeps each child's pytest output as DIR/<id>.txt. The parent pre-imports the third-party modules the tests
import (found by a collection run) so that each child pays only for the project's own modules.
"""
from __future__ import annotations

import ast
import copy
import importlib
import importlib.abc
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

CMP_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
BIN_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.Div: ast.Mult,
            ast.FloorDiv: ast.Mult, ast.LShift: ast.RShift, ast.RShift: ast.LShift, ast.BitOr: ast.BitAnd,
            ast.BitAnd: ast.BitOr, ast.BitXor: ast.BitOr, ast.Mod: ast.Mult}


def _annotation_ids(tree: ast.AST) -> set[int]:
    """Nodes inside annotations (strings at run time here: mutating them changes nothing)."""
    out: set[int] = set()

    def mark(n: ast.AST | None) -> None:
        if n is not None:
            out.update(id(x) for x in ast.walk(n))
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mark(n.returns)
            for a in n.args.args + n.args.kwonlyargs + n.args.posonlyargs + [n.args.vararg, n.args.kwarg]:
                if a is not None:
                    mark(a.annotation)
        elif isinstance(n, ast.AnnAssign):
            mark(n.annotation)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            mark(n)
        elif isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            mark(n)  # docstrings
    return out


def sites(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(node index in ast.walk order, kind, description) for every mutation."""
    skip = _annotation_ids(tree)
    out = []
    for i, n in enumerate(ast.walk(tree)):
        if id(n) in skip:
            continue
        if isinstance(n, ast.Compare):
            for k, op in enumerate(n.ops):
                if type(op) in CMP_SWAP:
                    out.append((i, f"cmp{k}", f"{type(op).__name__} -> {CMP_SWAP[type(op)].__name__}"))
        elif isinstance(n, ast.BoolOp):
            out.append((i, "boolop", "and -> or" if isinstance(n.op, ast.And) else "or -> and"))
        elif isinstance(n, ast.BinOp) and type(n.op) in BIN_SWAP:
            out.append((i, "binop", f"{type(n.op).__name__} -> {BIN_SWAP[type(n.op)].__name__}"))
        elif isinstance(n, ast.AugAssign) and type(n.op) in BIN_SWAP:
            out.append((i, "augop", f"{type(n.op).__name__}= -> {BIN_SWAP[type(n.op)].__name__}="))
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.Not, ast.USub)):
            out.append((i, "unary", f"drop {type(n.op).__name__}"))
        elif isinstance(n, ast.Constant):
            if isinstance(n.value, bool):
                out.append((i, "const", f"{n.value} -> {not n.value}"))
            elif isinstance(n.value, int):
                out.append((i, "const", f"{n.value} -> {n.value + 1}"))
            elif isinstance(n.value, float):
                out.append((i, "const", f"{n.value} -> {n.value + 1}"))
        elif isinstance(n, ast.Return) and n.value is not None and not (
                isinstance(n.value, ast.Constant) and n.value.value is None):
            out.append((i, "return", "return None"))
        elif isinstance(n, ast.If):
            out.append((i, "ifnot", "if X -> if not X"))
    return out


def mutate(tree: ast.AST, index: int, kind: str) -> tuple[ast.AST, int]:
    tree = copy.deepcopy(tree)
    n = list(ast.walk(tree))[index]
    line = getattr(n, "lineno", 0)
    if kind.startswith("cmp"):
        k = int(kind[3:])
        n.ops[k] = CMP_SWAP[type(n.ops[k])]()
    elif kind == "boolop":
        n.op = ast.Or() if isinstance(n.op, ast.And) else ast.And()
    elif kind in ("binop", "augop"):
        n.op = BIN_SWAP[type(n.op)]()
    elif kind == "unary":
        # replace the UnaryOp by its operand in its parent
        for parent in ast.walk(tree):
            for field, value in ast.iter_fields(parent):
                if value is n:
                    setattr(parent, field, n.operand)
                elif isinstance(value, list):
                    for j, v in enumerate(value):
                        if v is n:
                            value[j] = n.operand
    elif kind == "const":
        n.value = (not n.value) if isinstance(n.value, bool) else n.value + 1
    elif kind == "return":
        n.value = ast.Constant(None)
    elif kind == "ifnot":
        n.test = ast.UnaryOp(ast.Not(), n.test)
    return ast.fix_missing_locations(tree), line


class _Serve(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, name: str, path: str, code) -> None:
        self.name, self.path, self.code = name, path, code

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001
        if fullname == self.name:
            return importlib.util.spec_from_file_location(fullname, self.path, loader=self)
        return None

    def create_module(self, spec):  # noqa: ANN001
        return None

    def exec_module(self, module) -> None:  # noqa: ANN001
        exec(self.code, module.__dict__)


def run_child(name: str, path: str, tree: ast.AST | None, tests: list[str], timeout: float, log: str = os.devnull
              ) -> str:
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            if tree is not None:
                code = compile(tree, path, "exec")
                sys.meta_path.insert(0, _Serve(name, path, code))
            import pytest
            rc = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-m", "unit", *tests])
            os._exit(int(rc))
        except BaseException:
            os._exit(99)
    deadline = time.monotonic() + timeout
    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.05)


def preload(tests: list[str]) -> None:
    """Import, in this parent, the third-party modules a collection of `tests` imports."""
    code = ("import sys, pytest, json; pytest.main(['--collect-only','-q','-p','no:cacheprovider',*sys.argv[1:]]);"
            "print('@@'+json.dumps(sorted(sys.modules)), file=sys.__stderr__)")
    r = subprocess.run([sys.executable, "-c", code, *tests], capture_output=True, text=True)
    names = json.loads(r.stderr.split("@@")[-1])
    own = ("controller", "tests", "endpoint", "fabricctl", "mininet_labs", "conftest", "__main__")
    for m in names:
        if m.split(".")[0] in own or m.startswith("test_"):
            continue
        try:
            importlib.import_module(m)
        except BaseException:  # a preload only (fork speed): a module that fails here is imported by the test itself
            pass
    import pytest  # noqa: F401


def main() -> None:
    args = sys.argv[1:]
    timeout, only = 60.0, None
    if "--timeout" in args:
        i = args.index("--timeout")
        timeout = float(args[i + 1])
        del args[i:i + 2]
    if "--only" in args:
        i = args.index("--only")
        only = {int(x) for x in args[i + 1].split(",")}
        del args[i:i + 2]
    path, name, out, tests = args[0], args[1], args[2], args[3:]
    tree = ast.parse(open(path).read(), path)
    preload(tests)
    t0 = time.monotonic()
    base = run_child(name, path, tree, tests, timeout * 3)
    print(f"baseline (unparsed, unmutated): {base} in {time.monotonic() - t0:.1f}s", flush=True)
    if base != "survived":
        sys.exit("baseline fails: fix the test selection first")
    results = []
    all_sites = sites(tree)
    src = open(path).read().splitlines()
    for k, (idx, kind, desc) in enumerate(all_sites):
        if only is not None and k not in only:
            continue
        mtree, line = mutate(tree, idx, kind)
        t1 = time.monotonic()
        log = os.path.join(os.environ["MUTATION_LOGS"], f"{k}.txt") if os.environ.get("MUTATION_LOGS") else os.devnull
        verdict = run_child(name, path, mtree, tests, timeout, log)
        rec = {"id": k, "line": line, "kind": kind, "what": desc, "verdict": verdict,
               "seconds": round(time.monotonic() - t1, 2), "source": src[line - 1].strip() if line else ""}
        results.append(rec)
        print(json.dumps(rec), flush=True)
    summary = {"module": name, "tests": tests, "mutants": len(results),
               "killed": sum(r["verdict"] == "killed" for r in results),
               "survived": sum(r["verdict"] == "survived" for r in results),
               "timeout": sum(r["verdict"] == "timeout" for r in results),
               "seconds": round(time.monotonic() - t0, 1), "results": results}
    json.dump(summary, open(out, "w"), indent=1)
    print(json.dumps({k: v for k, v in summary.items() if k != "results"}), flush=True)


if __name__ == "__main__":
    main()
