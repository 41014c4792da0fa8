"""The e-mail of an issued invoice or credit note, queued after the commit that issued it."""

from celery import shared_task

from portal.billing.notifications import invoice_issued_notify, spend_alert_notify


@shared_task(name="billing.invoice_issued_notify", acks_late=True, autoretry_for=(OSError,),
             retry_backoff=True, max_retries=5)
def invoice_issued_notify_task(invoice_id: int) -> int:
    return invoice_issued_notify(invoice_id=invoice_id)


@shared_task(name="billing.spend_alert_notify", acks_late=True, autoretry_for=(OSError,),
             retry_backoff=True, max_retries=5)
def spend_alert_notify_task(alert_id: int) -> int:
    return spend_alert_notify(alert_id=alert_id)
