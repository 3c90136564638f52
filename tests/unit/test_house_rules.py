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


DIALECT_NAMES = {"postgresql", "postgres", "sqlite"}
DIALECT_SEAM = Path("storage") / "dialect.py"
# Where another check of the dialect is allowed, and why:
DIALECT_EXEMPT = (
    # Frozen history: a revision must keep doing what it did when it was written.
    Path("storage") / "migrations" / "versions",
    # A leaf that imports nothing of ours: it checks the URL's scheme as text before any
    # engine exists, to name the setting in its error, and decides nothing by it.
    Path("config.py"),
    Path("config"),
)


def _dialect_checks(tree: ast.AST) -> list[int]:
    """Lines that compare a dialect name, register SQL for one (`@compiles`), or read the
    name to decide by (`.dialect.name`, `get_backend_name()`)."""

    def names_a_dialect(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in DIALECT_NAMES
        if isinstance(node, ast.Set | ast.Tuple | ast.List):
            return any(names_a_dialect(element) for element in node.elts)
        return False

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            if any(names_a_dialect(side) for side in [node.left, *node.comparators]):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            if name == "get_backend_name" or (
                name == "compiles" and any(names_a_dialect(arg) for arg in node.args)
            ):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "name"
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "dialect"
        ):
            lines.append(node.lineno)
    return sorted(set(lines))


def _dialect_offenders() -> list[str]:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative == DIALECT_SEAM or any(relative.is_relative_to(e) for e in DIALECT_EXEMPT):
            continue
        offenders += [f"{relative}:{line}" for line in _dialect_checks(ast.parse(path.read_text()))]
    return offenders


def test_only_the_dialect_seam_tells_postgresql_from_sqlite() -> None:
    """Issue 41 item 3: every "is this PostgreSQL" goes through storage/dialect.py, so a
    third dialect or a changed check has one place to change, not fifty."""
    assert _dialect_offenders() == []


def test_the_dialect_rule_sees_each_way_of_checking() -> None:
    """The rule above is only as good as what it recognises: each spelling seen so far
    must count as a check, and asking the seam must not."""
    checks = """
if conn.dialect.name == "postgresql": pass
dialect = conn.dialect.name
build = a if name != "sqlite" else b
if backend in {"postgresql", "postgres"}: pass
if url.get_backend_name(): pass
@compiles(element, "sqlite")
def f(): pass
"""
    assert _dialect_checks(ast.parse(checks)) == [2, 3, 4, 5, 6, 7]
    assert _dialect_checks(ast.parse("if is_postgresql(conn): pass\nx = 'sqlite'")) == []
