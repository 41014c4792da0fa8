"""Prometheus's service discovery at the portal: authenticated, the monitored nodes with the
labels queries select on; a real Prometheus scrapes the test exporters through it."""

from __future__ import annotations

import pytest

from provisioning.models import Node
from provisioning.states import NodeState
from tests.factories import H100_SKU, make_node
from tests.provisioning.monitoring.conftest import ALICE_ADDRESS, TOKEN

pytestmark = pytest.mark.django_db


def test_targets_refuse_a_missing_or_wrong_token(client, monitoring_tokens):
    assert client.get("/monitoring/targets/dcgm").status_code == 401
    wrong = client.get("/monitoring/targets/dcgm", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401 and wrong["WWW-Authenticate"].startswith("Bearer")


def test_an_empty_token_setting_refuses_every_token(client, settings):
    settings.MONITORING_TOKEN = ""
    assert client.get("/monitoring/targets/dcgm", HTTP_AUTHORIZATION="Bearer ").status_code == 401


def test_targets_list_active_nodes_with_node_sku_and_order(client, fleet, monitoring_tokens,
                                                           settings, sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-simulated")  # no machine: no exporter
    Node.objects.create(hostname="gpu-test-host", sku=fleet.alice_node.sku, driver="ssh",
                        management_address="10.9.9.9", state=NodeState.READY,
                        driver_options={"test_host": True})  # declared: no GPUs, no exporters
    Node.objects.create(hostname="gpu-stock", sku=fleet.alice_node.sku, driver="ssh",
                        management_address="10.9.9.10:2222", state=NodeState.READY)
    Node.objects.create(hostname="gpu-wiping", sku=fleet.alice_node.sku, driver="ssh",
                        management_address="10.9.9.11", state=NodeState.WIPING)
    response = client.get("/monitoring/targets/dcgm", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    port = settings.MONITORING_DCGM_EXPORTER_PORT
    by_node = {group["labels"]["node"]: group for group in response.json()}
    assert set(by_node) == {"gpu-alice-01", "gpu-charlie-01", "gpu-stock"}
    assert by_node["gpu-alice-01"] == {
        "targets": [f"{ALICE_ADDRESS}:{port}"],
        "labels": {"node": "gpu-alice-01", "sku": H100_SKU, "node_state": "active",
                   "order": fleet.alice_order.reference}}
    # The exporter's port, not the ssh port of the management address; a stock node has no order.
    assert by_node["gpu-stock"]["targets"] == [f"10.9.9.10:{port}"]
    assert "order" not in by_node["gpu-stock"]["labels"]
    node_port = settings.MONITORING_NODE_EXPORTER_PORT
    nodes = client.get("/monitoring/targets/node", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").json()
    assert f"{ALICE_ADDRESS}:{node_port}" in [t for g in nodes for t in g["targets"]]
    assert client.get("/monitoring/targets/gpu", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_prometheus_scrapes_the_nodes_the_portal_lists(fleet, prometheus):
    def alice_series():
        return prometheus.api("/api/v1/query",
                              query=f'DCGM_FI_DEV_GPU_TEMP{{order="{fleet.alice_order.reference}"}}')["result"]

    series = prometheus.wait_for("the alice node's GPU series", alice_series)
    assert len(series) == 8
    labels = series[0]["metric"]
    assert labels["node"] == "gpu-alice-01" and labels["sku"] == H100_SKU
    assert labels["modelName"] == "NVIDIA H100 80GB HBM3" and labels["hostname"] == "gpu-alice-01"
    assert {s["metric"]["node"] for s in series} == {"gpu-alice-01"}


@pytest.mark.django_db(transaction=True)
def test_prometheus_reads_the_portals_own_metrics_with_its_token(fleet, prometheus):
    def portal_scraped():
        return prometheus.api("/api/v1/query", query='up{job="trainyard"} == 1')["result"]
    prometheus.wait_for("the portal's /metrics scraped", portal_scraped)
    # Its own service-discovery calls, timed by the portal, are among what it scraped.
    assert prometheus.wait_for("the discovery requests' latency", lambda: prometheus.api(
        "/api/v1/query",
        query='trainyard_http_request_duration_seconds_count{view="monitoring:targets"}')["result"])
