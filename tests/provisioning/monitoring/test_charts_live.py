"""The server page's GPU charts and the metrics API against a real Prometheus scraping two
orders' nodes: each customer sees its own node's series, never the other's (404)."""

from __future__ import annotations

import pytest

from portal.orders.states import OrderState
from provisioning.states import NodeState
from tests.api.conftest import assert_problem, key_client
from tests.factories import H100_SKU, make_node, make_order

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def flowing(fleet, prometheus, settings):
    """Both nodes' GPUs scraped; alice's at 73 % busy, charlie's at 11 %."""
    settings.MONITORING_PROMETHEUS_URL = prometheus.url
    fleet.alice_exporter.set("DCGM_FI_DEV_GPU_UTIL", 73)
    fleet.charlie_exporter.set("DCGM_FI_DEV_GPU_UTIL", 11)

    def both_scraped():
        result = prometheus.api("/api/v1/query", query="count by (order) (DCGM_FI_DEV_GPU_UTIL > 0)")
        return len(result["result"]) == 2
    prometheus.wait_for("both nodes' utilisation", both_scraped)
    return fleet


def test_the_server_page_charts_the_customers_own_node(login, people, flowing):
    html = login(people.alice).get(f"/orders/{flowing.alice_order.reference}/server/").content.decode()
    assert "GPU usage" in html and "GPU busy 73 % over the last hour" in html
    assert "gpu-alice-01 · every GPU a line" in html and "gpu-charlie-01" not in html
    # Six metrics, a line per GPU (a dot while the window holds one sample)
    assert html.count('class="series"') == 6 * 8
    assert "Simulated" not in html
    assert "lowest 73 %, highest 73 %, mean 73 %" in html


def test_the_charts_card_refreshes_with_another_range(login, people, flowing):
    client = login(people.alice)
    url = f"/orders/{flowing.alice_order.reference}/server/metrics/?range=24h"
    response = client.get(url, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<section class="card gpu-metrics"')
    assert 'aria-current="true">24 hours' in html and "GPU busy 73 % over the last 24 hours" in html


def test_another_customer_gets_404_for_the_page_the_card_and_the_api(login, people, flowing):
    charlie = login(people.charlie)
    reference = flowing.alice_order.reference
    assert charlie.get(f"/orders/{reference}/server/").status_code == 404
    assert charlie.get(f"/orders/{reference}/server/metrics/").status_code == 404
    assert_problem(key_client(people.outsider_org).get(
        f"/api/v1/orders/{reference}/server/metrics?metric=gpu_util&range=1h"), 404)


def test_the_api_answers_the_orders_own_series(people, flowing):
    api = key_client(people.acme)
    response = api.get(f"/api/v1/orders/{flowing.alice_order.reference}/server/metrics"
                       "?metric=gpu_util&range=1h")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["metric"], body["unit"], body["range"], body["simulated"]) == ("gpu_util", "%", "1h", False)
    assert {s["node"] for s in body["series"]} == {"gpu-alice-01"}
    assert sorted(int(s["gpu"]) for s in body["series"]) == list(range(8))
    assert {v for s in body["series"] for _, v in s["points"]} == {73.0}


def test_the_api_refuses_a_metric_or_range_off_the_list(people, flowing):
    api = key_client(people.acme)
    url = f"/api/v1/orders/{flowing.alice_order.reference}/server/metrics"
    body = assert_problem(api.get(f"{url}?metric=up&range=1h"), 400, "invalid")
    assert "metric" in body["errors"]
    assert "range" in assert_problem(api.get(f"{url}?metric=power&range=30d"), 400)["errors"]


def test_a_prometheus_that_does_not_answer_is_said_not_drawn_and_asked_once(login, people, fleet,
                                                                          settings, monkeypatch):
    from provisioning.monitoring import sources
    from tests.provisioning.monitoring.prometheus import free_port
    settings.MONITORING_PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    asked = []
    real_get = sources.requests.get
    monkeypatch.setattr(sources.requests, "get", lambda *a, **k: asked.append(a) or real_get(*a, **k))
    html = login(people.alice).get(f"/orders/{fleet.alice_order.reference}/server/").content.decode()
    assert "GPU metrics are unavailable right now" in html
    assert len(asked) == 1  # one refused connection, not one per chart


def test_without_prometheus_a_simulated_node_shows_a_labelled_simulated_series(login, people,
                                                                             catalog, settings,
                                                                             sim_dir):
    settings.MONITORING_PROMETHEUS_URL = ""
    order = make_order(people.acme, by=people.alice, state=OrderState.ACTIVE)
    node = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-sim-01", state=NodeState.ACTIVE)
    node.order = order
    node.save(update_fields=["order"])
    html = login(people.alice).get(f"/orders/{order.reference}/server/").content.decode()
    assert "Simulated data" in html and ">Simulated</span>" in html
    assert "GPU busy" in html and html.count('class="series"') == 6 * 8
    body = key_client(people.acme).get(
        f"/api/v1/orders/{order.reference}/server/metrics?metric=temperature&range=7d").json()
    assert body["simulated"] is True and len(body["series"]) == 8


def test_without_prometheus_a_node_with_real_gpus_says_so_and_shows_no_generated_series(
        login, people, fleet, settings):
    settings.MONITORING_PROMETHEUS_URL = ""
    html = login(people.alice).get(f"/orders/{fleet.alice_order.reference}/server/").content.decode()
    assert "GPU metrics are not collected for this server yet." in html
    assert "Simulated" not in html and "gpu-chart" not in html and "GPU busy" not in html
    body = key_client(people.acme).get(
        f"/api/v1/orders/{fleet.alice_order.reference}/server/metrics?metric=gpu_util&range=1h").json()
    assert body["simulated"] is False and body["series"] == []
