"""The suite collects on a machine without the `ml` extra: torch-measuring tests skip, not crash."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASURED = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*_measured.py"))

BLOCK_TORCH = """
import sys
sys.modules["torch"] = None  # import torch now raises ImportError, as where it is not installed
sys.modules["transformers"] = None
import pytest
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
"""


def test_torch_measuring_tests_skip_when_torch_is_absent():
    assert len(MEASURED) >= 3
    done = subprocess.run([sys.executable, "-c", BLOCK_TORCH, *MEASURED], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert "error" not in output.lower(), output
    assert output.count("could not import 'torch'") == len(MEASURED), output
