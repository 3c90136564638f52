"""Lint: every test says why it matters in its docstring (HOUSE rule 15).

A test function (`test_*` in `tests/**/test_*.py`) must open with a docstring; its first
line is the specification a reader sees in failures and in `pytest --collect-only`. Exits 1
and names each test without one.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "tests"


def undocumented(root: Path = ROOT) -> Iterator[str]:
    for path in sorted(root.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if not node.name.startswith("test_"):
                continue
            docstring = ast.get_docstring(node)
            if not docstring or not docstring.strip().splitlines()[0].strip():
                yield f"{path.relative_to(root.parent)}:{node.lineno}: {node.name} has no docstring"


def main() -> int:
    problems = list(undocumented())
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} test(s) without a docstring saying why they matter")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
