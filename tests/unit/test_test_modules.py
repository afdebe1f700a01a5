"""Test modules share helpers through the test kit (`zkcoord.testing`), conftest fixtures or helper modules, never
by importing one another: a test module imported by another runs its module-level set-up twice and ties two
files' fixtures together (test_mixed_incremental once imported its node from test_mixed_migration)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# Test modules allowed to import another: none left (a new entry needs a reason).
KNOWN: dict[str, list[str]] = {}


def imported_test_modules(source: str) -> list[str]:
    """The test modules (a last name part `test_*`) that `source` imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [n for n in names if n.rsplit(".", 1)[-1].startswith("test_")]
    return found


def test_the_check_sees_a_test_module_imported() -> None:
    assert imported_test_modules("from e2e.test_mixed_migration import Cluster\n") == [
        "e2e.test_mixed_migration"
    ]
    assert imported_test_modules("def f():\n    import e2e.test_proxy as p\n") == ["e2e.test_proxy"]
    assert imported_test_modules("from e2e.proxies import ProxyProcess\nimport pytest\n") == []


def test_no_test_module_imports_another() -> None:
    offenders = {
        str(path.relative_to(TESTS)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := imported_test_modules(path.read_text()))
    }
    assert {path: imported for path, imported in offenders.items() if KNOWN.get(path) != imported} == {}
