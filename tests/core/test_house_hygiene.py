"""Importing settings creates nothing (Django's start creates the development directories), and a
migration is frozen: it reads no file (the live seed moves on; a migration must not)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
READS = {"open", "read_text", "read_bytes", "load", "loads"}


def _python(code: str, var_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRAINYARD_VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "portal.settings",
           "REDIS_URL": ""}
    env.pop("DATABASE_URL", None)
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True)


def test_importing_settings_creates_no_directory_and_django_start_does(tmp_path):
    var_dir = tmp_path / "var"
    done = _python("import portal.settings", var_dir)
    assert done.returncode == 0, done.stderr
    assert not var_dir.exists()
    done = _python("import django; django.setup()", var_dir)
    assert done.returncode == 0, done.stderr
    assert (var_dir / "celery" / "queue").is_dir() and (var_dir / "celery" / "results").is_dir()


def _file_reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in READS:
                found.append(f"{path.name}:{node.lineno} {name}()")
    return found


def test_no_migration_reads_a_file():
    migrations = [*REPO.glob("portal/*/migrations/0*.py"), *REPO.glob("provisioning/migrations/0*.py")]
    assert len(migrations) > 20
    assert [read for path in migrations for read in _file_reads(path)] == []


def test_the_check_finds_a_read(tmp_path):
    sample = tmp_path / "0004_sample.py"
    sample.write_text("import json\nrows = json.loads(SEED.read_text())\n", encoding="utf-8")
    assert _file_reads(sample) == ["0004_sample.py:2 loads()", "0004_sample.py:2 read_text()"]
