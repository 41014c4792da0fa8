import pytest

from portal.core.tasks import health_ping


@pytest.mark.celery_worker
def test_a_real_worker_runs_the_health_task_through_redis(celery_worker_process, settings):
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    value = health_ping.delay().get(timeout=30)
    assert value["status"] == "ok"
    assert value["worker"]  # the worker's host name
    assert "core.health_ping" in celery_worker_process.output()
