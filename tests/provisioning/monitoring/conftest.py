"""Two orders of two customers, one node each, each node with a dcgm-exporter stand-in on its
own loopback address; a real Prometheus discovers them through the portal's scrape targets."""

from __future__ import annotations

import socket
from dataclasses import dataclass

import pytest

from portal.orders.states import OrderState
from provisioning.models import Node
from provisioning.states import NodeState
from tests.factories import H100_SKU, make_order
from tests.provisioning.monitoring.alertmanager import alertmanager_config, start_alertmanager
from tests.provisioning.monitoring.exporter import DcgmExporter
from tests.provisioning.monitoring.prometheus import (
    RULES,
    Daemon,
    start_prometheus,
    stop_daemon,
    test_config,
)

TOKEN = "test-monitoring-token-0123456789"
ALERT_TOKEN = "test-alert-token-9876543210"
# The nodes' management addresses: Linux answers on all of 127.0.0.0/8.
ALICE_ADDRESS, CHARLIE_ADDRESS = "127.0.0.2", "127.0.0.3"


@pytest.fixture
def monitoring_tokens(settings):
    settings.MONITORING_TOKEN = TOKEN
    settings.MONITORING_ALERT_TOKEN = ALERT_TOKEN
    return TOKEN


def _common_free_port(*hosts: str) -> int:
    """A port free on every one of ``hosts`` (each node's exporter listens on the same port)."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind((hosts[0], 0))
            port = first.getsockname()[1]
            try:
                for host in hosts[1:]:
                    with socket.socket() as other:
                        other.bind((host, port))
            except OSError:
                continue
            return port
    raise AssertionError("no common free port")


@dataclass
class Fleet:
    alice_order: object
    charlie_order: object
    alice_node: Node
    charlie_node: Node
    alice_exporter: DcgmExporter
    charlie_exporter: DcgmExporter


@pytest.fixture
def fleet(people, catalog, settings):
    port = _common_free_port(ALICE_ADDRESS, CHARLIE_ADDRESS)
    settings.MONITORING_DCGM_EXPORTER_PORT = port
    settings.MONITORING_NODE_EXPORTER_PORT = _common_free_port(ALICE_ADDRESS, CHARLIE_ADDRESS)
    alice_order = make_order(people.acme, by=people.alice, state=OrderState.ACTIVE)
    charlie_order = make_order(people.outsider_org, by=people.charlie, state=OrderState.ACTIVE)
    nodes = [Node.objects.create(hostname=hostname, sku=order.sku, management_address=address,
                                 driver="ssh", state=NodeState.ACTIVE, order=order)
             for hostname, order, address in (("gpu-alice-01", alice_order, ALICE_ADDRESS),
                                              ("gpu-charlie-01", charlie_order, CHARLIE_ADDRESS))]
    gpus = nodes[0].sku.gpu_count
    exporters = [DcgmExporter(host=address, port=port, hostname=node.hostname, gpus=gpus,
                              model="NVIDIA H100 80GB HBM3")
                 for node, address in zip(nodes, (ALICE_ADDRESS, CHARLIE_ADDRESS), strict=True)]
    yield Fleet(alice_order, charlie_order, *nodes, *exporters)
    for exporter in exporters:
        exporter.close()


def _test_rules(tmp_path) -> list:
    """The repo's rule files with the XID rule's 10-minute window shortened so an alert clears
    within the test (the expressions are otherwise loaded as shipped)."""
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    rule_files = []
    for path in sorted(RULES.glob("*.yml")):
        target = rules_dir / path.name
        target.write_text(path.read_text().replace("[10m]", "[6s]"))
        rule_files.append(target)
    return rule_files


def _prometheus(tmp_path, portal_url: str, alertmanager: Daemon | None = None) -> Daemon:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    notify = alertmanager.url.removeprefix("http://") if alertmanager else None
    return start_prometheus(tmp_path, test_config(portal_url=portal_url, token_file=token_file,
                                                  rule_files=_test_rules(tmp_path),
                                                  alertmanager=notify))


@pytest.fixture
def prometheus(live_server, monitoring_tokens, tmp_path) -> Daemon:
    """A real Prometheus scraping the nodes the live portal lists, with the repo's rules."""
    server = _prometheus(tmp_path, live_server.url)
    yield server
    stop_daemon(server)


@pytest.fixture
def alerting(live_server, monitoring_tokens, tmp_path):
    """Prometheus → Alertmanager → the live portal's receiver, each a real daemon on loopback:
    yields (prometheus, alertmanager)."""
    token_file = tmp_path / "alert-token"
    token_file.write_text(ALERT_TOKEN)
    alertmanager = start_alertmanager(tmp_path / "alertmanager", alertmanager_config(
        portal_url=live_server.url, token_file=token_file))
    try:
        prometheus = _prometheus(tmp_path, live_server.url, alertmanager)
    except BaseException:
        stop_daemon(alertmanager)
        raise
    yield prometheus, alertmanager
    stop_daemon(prometheus)
    stop_daemon(alertmanager)


assert H100_SKU  # the SKU make_order's quote uses: 8 GPUs a node
