"""The customer's e-mail for an order event is sent by a Celery task queued after the commit
(ids in, once even when delivered twice, retried when the mail server is down); placing an order
(submitted, then queued for approval) sends one e-mail, not two."""

import pytest
from django.core import mail

from portal.orders.models import OrderEvent
from portal.orders.tasks import order_event_notify_task
from tests.factories import submitted_order
from tests.provisioning.test_tasks_worker import wait_for


def _customer_mail():
    return [m for m in mail.outbox if m.subject.startswith("[Trainyard] Order")]


def test_placing_an_order_sends_one_email_after_the_commit(catalog, people, emails_inline, mailoutbox,
                                                           django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        order = submitted_order(people)
    assert order.state == "pending_approval" and not _customer_mail()  # nothing before the commit
    for callback in callbacks:
        callback()
    [message] = _customer_mail()
    assert message.subject == f"[Trainyard] Order {order.reference}: Pending approval"
    assert "We have received your order; it is waiting for approval" in message.body
    assert message.to == [people.alice.email]
    submitted = order.events.get(to_state="submitted", from_state="draft")
    assert submitted.notified_at is None  # the queued-for-approval e-mail speaks for it
    assert order.events.get(to_state="pending_approval").notified_at is not None


def test_a_task_delivered_twice_sends_one_email(catalog, people, mailoutbox):
    order = submitted_order(people)
    event = order.events.get(to_state="pending_approval")
    assert order_event_notify_task(event.pk) == 1
    assert order_event_notify_task(event.pk) == 0
    assert len(_customer_mail()) == 1


def test_a_mail_server_outage_is_retried_and_nothing_is_lost(catalog, people, mailoutbox, settings):
    order = submitted_order(people)
    event = order.events.get(to_state="pending_approval")
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2  # nobody
    with pytest.raises(OSError):  # the task's autoretry takes OSError (SMTP errors are OSErrors)
        order_event_notify_task(event.pk)
    event.refresh_from_db()
    assert event.notified_at is None  # the claim was given back for the retry
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert order_event_notify_task(event.pk) == 1
    assert len(_customer_mail()) == 1


@pytest.mark.celery_worker
@pytest.mark.usefixtures("require_postgres")
def test_a_real_worker_sends_the_email_once_the_order_is_committed(celery_worker_process, catalog,
                                                                   people):
    order = submitted_order(people)  # committed: the test database is transactional here
    event = OrderEvent.objects.get(order=order, to_state="pending_approval")
    wait_for(lambda: OrderEvent.objects.filter(pk=event.pk, notified_at__isnull=False).exists(),
             worker=celery_worker_process, what="the worker to send the e-mail")
    # The console backend's text reaches the worker's log through Celery's stdout redirect,
    # which may land after the commit that marks the event notified.
    subject = f"Subject: [Trainyard] Order {order.reference}: Pending approval"
    wait_for(lambda: subject in celery_worker_process.output(), worker=celery_worker_process,
             what="the e-mail's text in the worker's log")
    output = celery_worker_process.output()
    assert "orders.order_event_notify" in output
    assert output.count(f"Order {order.reference}: Submitted") == 0
