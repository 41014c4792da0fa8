"""Celery time limits of the step task follow the step deadlines (not the global 25/30 min).

The messages go to a real Redis broker on a queue of their own with no worker on it; the test
reads them back and checks the ``timelimit`` header a worker would apply.
"""

import base64
import json
import uuid

import pytest

from provisioning import tasks


@pytest.fixture
def private_queue(require_redis, settings):
    import redis

    from portal.celery import app

    queue = f"test-limits-{uuid.uuid4().hex[:10]}"
    old = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        yield client, queue
    finally:
        app.conf.task_default_queue = old
        client.delete(queue)


def _sent(client, queue) -> dict[str, list]:
    """step name → [hard, soft] time limit of each message waiting on ``queue``."""
    limits = {}
    for raw in client.lrange(queue, 0, -1):
        message = json.loads(raw)
        headers = message["headers"]
        assert headers["task"] == "provisioning.step"
        step = json.loads(base64.b64decode(message["body"]))[0][2]
        limits[step] = headers["timelimit"]
    return limits


def test_step_messages_carry_limits_derived_from_the_step_deadlines(private_queue, settings):
    client, queue = private_queue
    settings.PROVISIONING_STEP_DEADLINE_S = 3600
    settings.PROVISIONING_STEP_DEADLINES_S = {"deploy_os": 7200, "wipe": 10800}
    settings.CELERY_TASK_SOFT_TIME_LIMIT = 25 * 60
    tasks.enqueue_steps([(1, 2, "deploy_os"), (1, 2, "wipe"), (1, 2, "configure")])
    margin = tasks.STEP_HARD_LIMIT_MARGIN_S
    assert _sent(client, queue) == {
        "deploy_os": [7200 + margin, 7200],
        "wipe": [10800 + margin, 10800],
        "configure": [3600 + margin, 3600],
    }


def test_the_limits_follow_the_settings(settings):
    settings.PROVISIONING_STEP_DEADLINE_S = 90
    settings.PROVISIONING_STEP_DEADLINES_S = {"deploy_os": 600}
    assert tasks.step_time_limits("deploy_os") == {
        "soft_time_limit": 600, "time_limit": 600 + tasks.STEP_HARD_LIMIT_MARGIN_S}
    assert tasks.step_time_limits("stack")["soft_time_limit"] == 90
