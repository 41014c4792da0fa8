"""Fulfilment's beat task. Registered with the worker by ``ProvisioningConfig.ready`` (it calls a
service, which queues through ``provisioning.tasks``: this module cannot live there)."""

from celery import shared_task

from provisioning.fulfilment.orders import orders_terminate_due


@shared_task(name="provisioning.terminate_due", acks_late=True)
def terminate_due_task() -> int:
    """Orders past their customer-set termination time, terminated as a request would."""
    return len(orders_terminate_due())


# The old name (a billing task until the beat moved here): a beat or worker of the release before
# still reaches it during an upgrade.
@shared_task(name="billing.terminate_due", acks_late=True)
def terminate_due_old_name_task() -> int:
    return terminate_due_task()
