"""Acceptance: the node's monitoring exporters answer on its management address, from where
Prometheus scrapes them (the worker asks, as Prometheus would). A simulated node and a declared
test host have none by declaration: the check is skipped and says why."""

from __future__ import annotations

import requests
from django.conf import settings

from provisioning.acceptance.report import AcceptanceCheck
from provisioning.drivers import DriverError, driver_class, is_test_host
from provisioning.stack.exporters import listen_host

NAME = "Monitoring exporters answer"
# What each exporter's /metrics must hold: a GPU field of dcgm-exporter, a node_exporter family.
EXPECTED = {"dcgm-exporter": ("MONITORING_DCGM_EXPORTER_PORT", "DCGM_FI_DEV_GPU_TEMP"),
            "node_exporter": ("MONITORING_NODE_EXPORTER_PORT", "node_")}
TIMEOUT_S = 5.0


def exporters_check(node) -> AcceptanceCheck:
    if driver_class(node.driver).simulated:
        return AcceptanceCheck(NAME, True, "simulated node: no exporters by declaration",
                               status="skip", node=node.hostname)
    if is_test_host(node):
        return AcceptanceCheck(NAME, True, "test host (driver option test_host): no GPUs, no "
                               "exporters by declaration", status="skip", node=node.hostname)
    try:
        host = listen_host(node.management_address)
    except DriverError as exc:
        return AcceptanceCheck(NAME, False, exc.message, status="fail", node=node.hostname)
    problems = [p for p in (_problem(name, host, *spec) for name, spec in EXPECTED.items()) if p]
    if problems:
        return AcceptanceCheck(NAME, False, "; ".join(problems), status="fail", node=node.hostname)
    return AcceptanceCheck(NAME, True, f"dcgm-exporter and node_exporter on {host}",
                           status="pass", node=node.hostname)


def _problem(name: str, host: str, port_setting: str, expected: str) -> str:
    url = f"http://{host}:{getattr(settings, port_setting)}/metrics"
    try:
        response = requests.get(url, timeout=TIMEOUT_S)
    except requests.RequestException as exc:
        return f"{name} does not answer at {url} ({type(exc).__name__})"
    if response.status_code != 200 or expected not in response.text:
        return f"{name} at {url} answered {response.status_code} without {expected}"
    return ""

