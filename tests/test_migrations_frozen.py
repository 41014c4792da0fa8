"""A migration is frozen: it runs the same whatever the app's code becomes. It may import Django,
the standard library and the field classes, validators and default callables Django writes into
it (``portal.*.models``, ``portal.core.crypto``), never services, selectors, seed data or files."""

import ast

from tests.conftest import REPO_ROOT

ALLOWED = ("portal.core.crypto",)  # encrypted field classes, referenced by the field definitions


def _live_imports(source: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        for name in names:
            if name.startswith(("portal.", "provisioning.")) and not (
                    name.endswith(".models") or name in ALLOWED):
                out.append(name)
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                "open", "read_text", "read_bytes"):
            out.append("reads a file")
    return out


def test_no_migration_imports_live_code_or_reads_files():
    migrations = sorted(REPO_ROOT.glob("portal/*/migrations/0*.py")) + sorted(
        REPO_ROOT.glob("provisioning/migrations/0*.py"))
    assert len(migrations) > 20
    found = {str(p.relative_to(REPO_ROOT)): live for p in migrations
             if (live := _live_imports(p.read_text()))}
    assert found == {}


def test_the_scan_sees_a_live_import_and_a_file_read():
    assert _live_imports("from portal.billing.services import measured_before_set") == [
        "portal.billing.services"]
    assert _live_imports("import json\nrows = json.loads(SEED.read_text())") == ["reads a file"]
    assert _live_imports("import portal.quotes.models\nfrom django.db import migrations") == []
