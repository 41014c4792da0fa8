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
from tests.provisioning.monitoring.exporter import DcgmExporter
from tests.provisioning.monitoring.prometheus import (
    RULES,
    Prometheus,
    start_prometheus,
    stop_prometheus,
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


@pytest.fixture
def prometheus(live_server, monitoring_tokens, tmp_path) -> Prometheus:
    """A real Prometheus scraping the nodes the live portal lists, with the repo's rules. The XID
    rule's 10-minute window is shortened so an alert clears within the test (the rule file's
    expressions are otherwise loaded as shipped)."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    rule_files = []
    for path in sorted(RULES.glob("*.yml")):
        target = rules_dir / path.name
        target.write_text(path.read_text().replace("[10m]", "[6s]"))
        rule_files.append(target)
    server = start_prometheus(tmp_path, test_config(portal_url=live_server.url,
                                                     token_file=token_file, rule_files=rule_files))
    yield server
    stop_prometheus(server)


assert H100_SKU  # the SKU make_order's quote uses: 8 GPUs a node
