"""The monitoring exporters the stack installs on a GPU node: units that bind the management
address only, the pinned packages installed once, a pin that no apt source offers refused with a
clear message, the packages' own all-interface units masked (run for real with bash against a
scratch root, apt and systemd stood in by recorders); and the acceptance check that both answer."""

from __future__ import annotations

import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from provisioning.acceptance.exporters import exporters_check
from provisioning.models import Node
from provisioning.stack.exporters import exporters_env, exporters_script, listen_host
from tests.factories import H100_SKU, make_node
from tests.provisioning.monitoring.exporter import DcgmExporter
from tests.provisioning.monitoring.prometheus import free_port

RECORDER = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$TRAINYARD_CALLS"
"""


def test_the_units_bind_the_management_address_and_the_settings_ports(settings):
    settings.MONITORING_DCGM_EXPORTER_PORT, settings.MONITORING_NODE_EXPORTER_PORT = 9400, 9100
    env = exporters_env("10.20.0.7:2222")
    dcgm = env["TRAINYARD_DCGM_UNIT_TEXT"]
    assert "ExecStart=/usr/bin/dcgm-exporter -f /etc/dcgm-exporter/default-counters.csv " \
           "-a 10.20.0.7:9400 -r localhost:5555\n" in dcgm
    # DCGM's own host engine (loopback) first: the exporter reads it instead of embedding one.
    assert "After=network-online.target nvidia-dcgm.service\nWants=network-online.target\n" \
           "Requires=nvidia-dcgm.service\n" in dcgm
    assert "--web.listen-address=10.20.0.7:9100\n" in env["TRAINYARD_NODE_UNIT_TEXT"]
    assert env["TRAINYARD_DCGM_PACKAGES"].split() == settings.MONITORING_DCGM_PACKAGES
    assert listen_host("[fd00::7]:22") == "[fd00::7]" and listen_host("mgmt-07") == "mgmt-07"


def test_every_dcgm_package_is_pinned_and_dcgm_parts_share_one_release(settings):
    """The exporter deb with DCGM's core and proprietary parts of one release (NVIDIA pairs each
    exporter release with one DCGM release), every package pinned as package=version."""
    pins = dict(spec.split("=", 1) for spec in settings.MONITORING_DCGM_PACKAGES)
    assert all(pins.values()) and len(pins) == len(settings.MONITORING_DCGM_PACKAGES)
    assert set(pins) == {"datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-proprietary",
                         "datacenter-gpu-manager-exporter"}
    assert pins["datacenter-gpu-manager-4-core"] == pins["datacenter-gpu-manager-4-proprietary"]


def _madison(offered: dict[str, str]) -> str:
    """An apt-cache stand-in: ``madison NAME`` lists the versions ``offered`` (name: version)."""
    cases = "".join(f'{name}) echo " {name} | {version} | https://developer.download.nvidia.com/'
                    f'compute/cuda/repos/ubuntu2404/x86_64  Packages";; '
                    for name, version in offered.items())
    return f'#!/usr/bin/env bash\necho "apt-cache $*" >> "$TRAINYARD_CALLS"\ncase "$2" in {cases}esac\n'


def _pins(settings) -> dict[str, str]:
    pinned = dict(spec.split("=", 1) for spec in settings.MONITORING_DCGM_PACKAGES)
    return pinned | {settings.MONITORING_NODE_EXPORTER_PACKAGE: "1.5.0-1"}


def _run(tmp_path, settings, *, installed: str, offered: dict[str, str] | None = None,
         expect: int = 0):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("apt-get", "systemctl"):
        (bin_dir / name).write_text(RECORDER)
        (bin_dir / name).chmod(0o755)
    (bin_dir / "apt-cache").write_text(_madison(_pins(settings) if offered is None else offered))
    (bin_dir / "apt-cache").chmod(0o755)
    # dpkg-query answers what "is installed": nothing, or the pinned versions.
    (bin_dir / "dpkg-query").write_text(f"#!/usr/bin/env bash\n{installed}\n")
    (bin_dir / "dpkg-query").chmod(0o755)
    calls = tmp_path / "calls"
    calls.write_text("")
    script = tmp_path / "exporters.sh"
    script.write_text(exporters_script())
    env = {**os.environ, **exporters_env("10.20.0.7"), "TRAINYARD_ROOT": str(tmp_path / "root"),
           "TRAINYARD_CALLS": str(calls), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == expect, done.stdout + done.stderr
    return [c for c in calls.read_text().splitlines() if not c.startswith("apt-cache")], done.stdout


def test_the_script_installs_the_pinned_packages_writes_the_units_and_masks_the_packaged_ones(
        tmp_path, settings):
    calls, out = _run(tmp_path, settings, installed="exit 1")
    specs = " ".join([*settings.MONITORING_DCGM_PACKAGES, settings.MONITORING_NODE_EXPORTER_PACKAGE])
    assert calls[0] == "apt-get update -q"
    assert calls[1].startswith("apt-get install") and calls[1].endswith(specs)
    assert "systemctl mask nvidia-dcgm-exporter.service" in calls
    assert "systemctl mask prometheus-node-exporter.service" in calls
    assert calls[-3:] == [
        "systemctl enable --now nvidia-dcgm.service",
        "systemctl enable trainyard-dcgm-exporter.service trainyard-node-exporter.service",
        "systemctl restart trainyard-dcgm-exporter.service trainyard-node-exporter.service"]
    unit = (tmp_path / "root/etc/systemd/system/trainyard-dcgm-exporter.service").read_text()
    assert "-a 10.20.0.7:" in unit
    assert "exporters running" in out


def test_a_pin_no_apt_source_offers_is_refused_before_anything_changes(tmp_path, settings):
    """The CUDA repository offers another exporter version: a clear error, nothing installed, the
    units untouched (exit 1: a retry cannot help)."""
    offered = _pins(settings) | {"datacenter-gpu-manager-exporter": "4.6.0-1"}
    calls, out = _run(tmp_path, settings, installed="exit 1", offered=offered, expect=1)
    assert calls == ["apt-get update -q"]
    assert ("datacenter-gpu-manager-exporter=4.8.2-1 is in no apt source of this node "
            "(apt offers: 4.6.0-1); add NVIDIA's CUDA repository (cuda-keyring)") in out
    assert not (tmp_path / "root/etc/systemd/system").exists()
    calls, out = _run(tmp_path, settings, installed="exit 1", offered={}, expect=1)
    assert "datacenter-gpu-manager-4-core=1:4.5.3-1 is in no apt source of this node " \
           "(apt offers: nothing)" in out


def test_a_second_deploy_keeps_the_installed_packages(tmp_path, settings):
    answer = "case \"$3\" in " + "".join(f'{name}) echo "install ok installed {version}";; '
                                         for name, version in _pins(settings).items()) + "esac"
    calls, out = _run(tmp_path, settings, installed=answer)
    assert not [c for c in calls if c.startswith("apt-get")]
    assert "exporters already installed" in out
    assert "systemctl restart trainyard-dcgm-exporter.service trainyard-node-exporter.service" in calls


def test_a_changed_pin_installs_only_what_changed(tmp_path, settings):
    older = _pins(settings) | {"datacenter-gpu-manager-exporter": "4.8.1-1"}
    answer = "case \"$3\" in " + "".join(f'{name}) echo "install ok installed {version}";; '
                                         for name, version in older.items()) + "esac"
    calls, _ = _run(tmp_path, settings, installed=answer)
    assert [c for c in calls if c.startswith("apt-get install")] == [
        "apt-get install -y -q --no-install-recommends --allow-downgrades "
        "datacenter-gpu-manager-exporter=4.8.2-1"]


class _NodeExporter:
    def __init__(self, host: str, port: int):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"# TYPE node_load1 gauge\nnode_load1 0.42\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        self.server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.django_db
def test_acceptance_checks_that_both_exporters_answer_on_the_management_address(
        catalog, settings, sim_dir):
    settings.MONITORING_DCGM_EXPORTER_PORT = free_port("127.0.0.2")
    settings.MONITORING_NODE_EXPORTER_PORT = free_port("127.0.0.2")
    node = Node(hostname="gpu-real-01", sku=make_node(sku=H100_SKU, state_dir=sim_dir).sku,
                driver="ssh", management_address="127.0.0.2:22")
    down = exporters_check(node)
    assert down.outcome == "fail" and "dcgm-exporter does not answer at http://127.0.0.2:" in down.detail
    assert "node_exporter does not answer" in down.detail
    dcgm = DcgmExporter(host="127.0.0.2", port=settings.MONITORING_DCGM_EXPORTER_PORT,
                        hostname="gpu-real-01", gpus=8, model="NVIDIA H100 80GB HBM3")
    node_exporter = _NodeExporter("127.0.0.2", settings.MONITORING_NODE_EXPORTER_PORT)
    try:
        up = exporters_check(node)
    finally:
        dcgm.close()
        node_exporter.close()
    assert (up.outcome, up.detail) == ("pass", "dcgm-exporter and node_exporter on 127.0.0.2")


@pytest.mark.django_db
def test_simulated_nodes_and_test_hosts_have_no_exporters_by_declaration(catalog, sim_dir):
    simulated = make_node(sku=H100_SKU, state_dir=sim_dir)
    assert exporters_check(simulated).outcome == "skip"
    test_host = Node(hostname="cpu-test", sku=simulated.sku, driver="ssh",
                     management_address="127.0.0.1:2222", driver_options={"test_host": True})
    check = exporters_check(test_host)
    assert check.outcome == "skip" and "no exporters by declaration" in check.detail
