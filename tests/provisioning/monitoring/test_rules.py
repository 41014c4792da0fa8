"""The shipped alert rules, evaluated by Prometheus's own engine (promtool test rules) on series
that fire and do not fire each of them."""

import shutil
import subprocess

from provisioning.monitoring.health import MAX_GPU_TEMPERATURE_C
from tests.conftest import missing_service
from tests.provisioning.monitoring.prometheus import RULES

HERE = __import__("pathlib").Path(__file__).parent


def test_the_rules_fire_when_they_should_and_only_then(tmp_path):
    promtool = shutil.which("promtool")
    if promtool is None:
        missing_service("promtool (Debian's prometheus) is not installed")
    rules = RULES / "trainyard.rules.yml"
    spec = tmp_path / "rules_test.yml"
    spec.write_text((HERE / "rules_test.yml").read_text().replace("RULES_FILE", str(rules)))
    result = subprocess.run([promtool, "test", "rules", str(spec)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_temperature_rule_uses_the_health_checks_limit():
    text = (RULES / "trainyard.rules.yml").read_text()
    limit = f"{MAX_GPU_TEMPERATURE_C:.0f}"
    assert f"DCGM_FI_DEV_GPU_TEMP > {limit}\n" in text and f"(limit {limit} °C)" in text
