"""Thin Celery tasks of billing: close last month (beat). The invoice e-mail's task is in
``mail_tasks`` (the invoice services queue it)."""

from celery import shared_task
from django.conf import settings
from django.utils import timezone
from django.utils.module_loading import import_string

from portal.billing import invoices, spend
from portal.billing.mail_tasks import invoice_issued_notify_task  # noqa: F401 (registered with the worker)


@shared_task(name="billing.close_month", acks_late=True)
def close_month_task() -> int:
    """Drafts last month's invoices; idempotent, so the hourly beat may run it any number of times."""
    return len(invoices.month_close(period=invoices.previous_month(timezone.now())))


@shared_task(name="billing.spend_check", acks_late=True)
def spend_check_task() -> int:
    return spend.spend_check_all()


@shared_task(name="billing.terminate_due", acks_late=True)
def terminate_due_task() -> int:
    """Orders past their customer-set termination time; fulfilment terminates them (a dotted
    path in settings: billing sits below fulfilment)."""
    return len(import_string(settings.BILLING_TERMINATE_DUE)())
