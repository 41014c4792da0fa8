"""/metrics: the portal's own metrics, for Prometheus (bearer token) and staff only; a pipeline
step, a run failed for good, webhook delivery attempts, a request and the Celery queue depth show
in it; gunicorn's processes are summed."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import redis

from portal.webhooks.delivery import delivery_attempt
from portal.webhooks.publish import endpoint_test_send
from portal.webhooks.services import endpoint_create
from tests.conftest import LOOPBACK_NETWORKS
from tests.factories import H100_SKU, approved_order, drain, make_node

TOKEN = "metrics-test-token-000111222"


@pytest.fixture
def token(settings):
    settings.MONITORING_TOKEN = TOKEN
    return TOKEN


def _sample(text: str, name: str, **labels) -> float:
    """The value of the sample ``name`` whose labels include ``labels`` (0 when absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _scrape(client) -> str:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    return response.content.decode()


def test_metrics_are_refused_to_anonymous_users_customers_and_a_wrong_token(client, token, login,
                                                                            people):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert login(people.alice).get("/metrics").status_code == 401


def test_a_staff_session_reads_the_metrics(login, people, db):
    response = login(people.olga).get("/metrics")
    assert response.status_code == 200 and b"trainyard_http_request_duration_seconds" in response.content


def test_a_pipeline_step_is_counted_by_step_driver_and_outcome(client, token, people, catalog,
                                                               sim_dir):
    labels = {"step": "reserve", "driver": "simulated", "outcome": "ok"}
    before = _sample(_scrape(client), "trainyard_pipeline_step_duration_seconds_count", **labels)
    make_node(sku=H100_SKU, state_dir=sim_dir)
    drain(approved_order(people).runs.get().pk)
    text = _scrape(client)
    assert _sample(text, "trainyard_pipeline_step_duration_seconds_count", **labels) == before + 1
    assert _sample(text, "trainyard_pipeline_step_duration_seconds_count", step="handover",
                   driver="simulated", outcome="ok") >= 1


def test_a_run_failing_for_good_is_counted_by_kind_and_step(client, token, people, catalog,
                                                            sim_dir):
    labels = {"kind": "provision", "step": "deploy_os"}
    before = _sample(_scrape(client), "trainyard_provisioning_failures_total", **labels)
    make_node(sku=H100_SKU, state_dir=sim_dir,
              fail={"deploy_os": {"permanent": "image checksum mismatch"}})
    drain(approved_order(people).runs.get().pk)
    assert _sample(_scrape(client), "trainyard_provisioning_failures_total", **labels) == before + 1


def test_webhook_delivery_attempts_are_counted_by_result(client, token, people, httpserver,
                                                         settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    endpoint, _ = endpoint_create(organisation=people.reseller, url=httpserver.url_for("/hook"))
    name = "trainyard_webhook_delivery_attempts_total"
    before = {result: _sample(_scrape(client), name, result=result)
              for result in ("succeeded", "retrying")}
    httpserver.expect_oneshot_request("/hook", method="POST").respond_with_data("ok")
    delivery_attempt(delivery_id=endpoint_test_send(endpoint=endpoint).pk)
    httpserver.expect_oneshot_request("/hook", method="POST").respond_with_data("no", status=500)
    delivery_attempt(delivery_id=endpoint_test_send(endpoint=endpoint).pk)
    text = _scrape(client)
    assert {result: _sample(text, name, result=result) for result in before} == {
        "succeeded": before["succeeded"] + 1, "retrying": before["retrying"] + 1}


def test_requests_are_timed_by_view_name_not_path(client, token, login, people, db):
    login(people.alice).get("/orders/")
    text = _scrape(client)
    assert _sample(text, "trainyard_http_request_duration_seconds_count", view="orders:list",
                   method="GET", status="2xx") >= 1
    assert "/orders/" not in text


def test_the_queue_depth_is_read_from_the_broker(client, token, settings, require_redis):
    settings.CELERY_BROKER_URL = settings.REDIS_URL
    settings.CELERY_TASK_DEFAULT_QUEUE = "trainyard-metrics-test"
    broker = redis.Redis.from_url(settings.REDIS_URL)
    broker.delete("trainyard-metrics-test")
    broker.lpush("trainyard-metrics-test", "a", "b", "c")
    try:
        text = _scrape(client)
    finally:
        broker.delete("trainyard-metrics-test")
    assert _sample(text, "trainyard_celery_queue_length", queue="trainyard-metrics-test") == 3


COUNT_ONE_STEP = """
from portal.core.metrics import step_observe
step_observe(step="deploy_os", driver="ssh", outcome="transient", seconds=2.5)
"""
EXPOSE = """
import sys
from portal.core.metrics import exposition
sys.stdout.write(exposition(broker_url="", queues=[]).decode())
"""


def test_under_several_processes_the_samples_of_each_are_summed(tmp_path):
    """gunicorn's workers and Celery's: PROMETHEUS_MULTIPROC_DIR shared by all of them."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):
        subprocess.run([sys.executable, "-c", COUNT_ONE_STEP], env=env, check=True, timeout=60)
    out = subprocess.run([sys.executable, "-c", EXPOSE], env=env, check=True, timeout=60,
                         capture_output=True, text=True).stdout
    assert _sample(out, "trainyard_pipeline_step_duration_seconds_count", step="deploy_os",
                   driver="ssh", outcome="transient") == 2
    assert _sample(out, "trainyard_pipeline_step_duration_seconds_sum", step="deploy_os") == 5.0
