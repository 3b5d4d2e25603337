"""The benchmarks are scripts of a clone, above the package: nothing in ``ledger/`` or
``projections/`` imports ``bench``, statically (import-linter's contract sees those) or by name
(``importlib.import_module("bench…")``, which no import graph shows); ``ari-ledger bench`` runs
``python -m bench`` in a child process, and offers the benchmarks that module runs."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _names_bench(node: ast.AST) -> bool:
    """An import of ``bench`` in any form: ``import bench…``, ``from bench… import``, or a call
    whose first argument is a string naming it (``import_module``, ``__import__``, ``run_module``)."""
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "bench" for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] == "bench"
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        first = node.args[0].value
        return isinstance(first, str) and first.split(".")[0] == "bench" and "import" in ast.unparse(node.func)
    return False


def test_the_package_never_imports_the_benchmarks() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for package in ("ledger", "projections")
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if _names_bench(node)
    ]
    assert found == []


def test_the_check_sees_each_form_of_import() -> None:
    forms = ["import bench.common", "from bench import common", "importlib.import_module('bench.prove_bench')"]
    assert all(
        _names_bench(next(n for n in ast.walk(ast.parse(f)) if not isinstance(n, ast.Module | ast.Expr))) for f in forms
    )
    assert not _names_bench(ast.parse("import benchmark").body[0])


def test_the_cli_offers_the_benchmarks_bench_runs(monkeypatch) -> None:
    from projections.adapters.cli.tools import BENCHMARKS

    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delitem(sys.modules, "bench.__main__", raising=False)
    from bench.__main__ import MODULES

    assert list(BENCHMARKS) == list(MODULES)
