"""Staff e-mails go by role through ``accounts.staff_notify``; the task's old name,
``orders.staff_notify``, stays registered so e-mails queued before the upgrade are still sent."""

from portal.accounts.staff_notifications import APPROVERS, OPERATORS
from portal.accounts.tasks import staff_notify_old_name_task, staff_notify_task
from portal.celery import app


def test_both_names_are_registered_with_the_worker_app():
    app.loader.import_default_modules()  # what a worker does at start-up: every app's tasks
    assert app.tasks["accounts.staff_notify"].name == staff_notify_task.name
    assert app.tasks["orders.staff_notify"].name == staff_notify_old_name_task.name


def test_the_old_name_sends_to_the_role_as_the_new_one_does(people, mailoutbox):
    people.sam.email, people.olga.email = "sam@example.com", "olga@example.com"
    people.sam.save(), people.olga.save()
    assert staff_notify_old_name_task(OPERATORS, "[Trainyard staff] queued before", "body") == 1
    assert staff_notify_task(APPROVERS, "[Trainyard staff] queued after", "body") == 1
    assert [(m.subject, m.to) for m in mailoutbox] == [
        ("[Trainyard staff] queued before", ["olga@example.com"]),
        ("[Trainyard staff] queued after", ["sam@example.com"])]
