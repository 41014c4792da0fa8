"""No function of the portal or provisioning is longer than 60 lines (docstring included): a
longer one is split where its parts can be named (issue 26, hygiene)."""

import ast

from tests.conftest import REPO_ROOT

MAX_LINES = 60


def _long_functions(source: str) -> list[tuple[str, int]]:
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > MAX_LINES]


def test_no_function_is_longer_than_60_lines():
    files = [p for base in ("portal", "provisioning") for p in sorted((REPO_ROOT / base).rglob("*.py"))
             if "migrations" not in p.parts]
    assert len(files) > 100
    found = {f"{p.relative_to(REPO_ROOT)}:{name}": n for p in files
             for name, n in _long_functions(p.read_text())}
    assert found == {}


def test_the_scan_counts_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    assert _long_functions(f"def f():\n{body}\n") == [("f", MAX_LINES + 1)]
    assert _long_functions("def g():\n    return 1\n") == []
