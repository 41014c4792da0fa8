"""The standalone Ironic the driver tests run against is what it claims to be: the real API,
HTTP basic auth enforced, fake-hardware nodes that go through Ironic's own state machine."""

import subprocess

import requests

from tests.engines.ironic import VENV_SCRIPT
from tests.provisioning.stack.test_renderers import shellcheck


def test_the_engine_enforces_http_basic_auth(ironic_engine):
    assert requests.get(f"{ironic_engine.url}/v1/nodes", timeout=10).status_code == 401
    wrong = requests.get(f"{ironic_engine.url}/v1/nodes", timeout=10, auth=("trainyard", "nope"))
    assert wrong.status_code == 401
    right = requests.get(f"{ironic_engine.url}/v1/nodes", timeout=10, auth=ironic_engine.htpasswd)
    assert right.status_code == 200


def test_an_enrolled_node_is_cleaned_into_available(ironic_admin):
    node = ironic_admin.enrol(properties={"memory_mb": 2048})
    assert node["provision_state"] == "available" and node["driver"] == "fake-hardware"
    assert node["properties"]["memory_mb"] == 2048


def test_the_venv_script_passes_shellcheck():
    done = subprocess.run([shellcheck(), str(VENV_SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
