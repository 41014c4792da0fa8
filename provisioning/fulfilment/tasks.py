"""Fulfilment's beat task. Registered with the worker by ``ProvisioningConfig.ready`` (it calls a
service, which queues through ``provisioning.tasks``: this module cannot live there)."""

from celery import shared_task

from provisioning.fulfilment.orders import orders_terminate_due


@shared_task(name="provisioning.terminate_due", acks_late=True)
def terminate_due_task() -> int:
    """Orders past their customer-set termination time, terminated as a request would."""
    return len(orders_terminate_due())
