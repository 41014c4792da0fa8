"""The estimator and the recommender load neither Django nor Celery when imported."""

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CHECK = (
    "import portal.sizing.estimator, portal.sizing.recommend, portal.core.units, sys\n"
    "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'celery'))\n"
    "print(' '.join(loaded))\n"
)


def test_importing_the_estimator_and_recommender_loads_no_django_and_no_celery():
    # A fresh interpreter: this test process has Django loaded already.
    result = subprocess.run([sys.executable, "-c", CHECK], cwd=REPO_ROOT, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)}, check=True)
    assert result.stdout.split() == [], f"loaded on import: {result.stdout}"
