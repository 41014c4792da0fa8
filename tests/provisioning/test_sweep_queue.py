"""The sweep has a queue of its own, and every way of running workers consumes it."""

import pytest
from django.conf import settings

from portal.celery import app
from portal.core.management.commands import devserver
from provisioning.tasks import step_task, sweep_task
from tests.conftest import REPO_ROOT
from tests.provisioning.test_tasks_worker import wait_for


def test_the_sweep_is_routed_to_its_own_queue():
    queue = settings.CELERY_SWEEP_QUEUE
    assert queue != settings.CELERY_TASK_DEFAULT_QUEUE
    assert app.amqp.router.route({}, sweep_task.name)["queue"].name == queue
    assert app.amqp.router.route({}, step_task.name)["queue"].name == settings.CELERY_TASK_DEFAULT_QUEUE
    assert settings.CELERY_BEAT_SCHEDULE["provisioning-sweep"]["options"]["queue"] == queue
    assert "CELERY_SWEEP_QUEUE" in (REPO_ROOT / "docs" / "operations.md").read_text()
    compose = (REPO_ROOT / "docker-compose.yml").read_text()
    assert '"-Q", "trainyard.sweep"' in compose and "sweeper:" in compose
    assert "CELERY_SWEEP_QUEUE" in open(devserver.__file__).read()


@pytest.mark.celery_worker
@pytest.mark.usefixtures("require_postgres")
def test_a_worker_runs_the_sweep_from_its_queue(celery_worker_process):
    # The worker's sweep queue is CELERY_QUEUE + ".sweep", as the worker's settings route it.
    sweep_task.apply_async(queue=f"{celery_worker_process.queue}.sweep")
    wait_for(lambda: "provisioning.sweep" in celery_worker_process.output()
             and "succeeded" in celery_worker_process.output(), timeout=30,
             worker=celery_worker_process, what="the sweep to run")
