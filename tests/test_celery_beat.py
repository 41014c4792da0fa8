"""Every task the beat schedules is registered with the worker (a renamed or moved task would
otherwise be sent by name every period and dropped as unknown)."""

from django.conf import settings

from portal.celery import app


def test_every_scheduled_task_is_registered():
    app.loader.import_default_modules()  # what a worker imports at start (autodiscovered tasks)
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "provisioning.terminate_due" in scheduled
    assert scheduled - set(app.tasks) == set()
