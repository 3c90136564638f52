"""House rules that import-linter cannot express, checked on the source tree."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "src" / "tidings"
DRIVER_SEAM = ("storage", "queue")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_driver_errors_are_imported_only_by_storage_and_queue() -> None:
    """HOUSE rule 20: above the storage seam, code sees domain errors, never driver ones."""
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] not in DRIVER_SEAM
        and any(name.startswith("sqlalchemy.exc") for name in _imports(path))
    ]
    assert offenders == []
