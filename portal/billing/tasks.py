"""Thin Celery tasks of billing: close last month (beat). The invoice e-mail's task is in
``mail_tasks`` (the invoice services queue it)."""

from celery import shared_task
from django.utils import timezone

from portal.billing import invoices, spend
from portal.billing.mail_tasks import invoice_issued_notify_task  # noqa: F401 (registered with the worker)


@shared_task(name="billing.close_month", acks_late=True)
def close_month_task() -> int:
    """Drafts last month's invoices; idempotent, so the hourly beat may run it any number of times."""
    return len(invoices.month_close(period=invoices.previous_month(timezone.now())))


@shared_task(name="billing.spend_check", acks_late=True)
def spend_check_task() -> int:
    return spend.spend_check_all()
