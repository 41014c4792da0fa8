"""Publishing an event: one row for the event, one delivery per subscribed endpoint, each sent by
a Celery task after the caller's transaction commits (nothing is sent for a rolled-back change).

Call inside the transaction that made the change, so the event exists exactly when it does."""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction
from django.db.models import Q

from portal.accounts.models import Organisation
from portal.webhooks.events import EventType
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from portal.webhooks.tasks import deliver_task


def endpoints_for(organisation: Organisation):
    """Enabled endpoints that see ``organisation``'s events: its own and its reseller's."""
    owners = Q(organisation_id=organisation.pk)
    if organisation.parent_id:
        owners |= Q(organisation_id=organisation.parent_id)
    return WebhookEndpoint.objects.filter(owners, enabled=True)


def _queue(deliveries: list[WebhookDelivery]) -> None:
    ids = [d.pk for d in deliveries]
    transaction.on_commit(lambda: [deliver_task.delay(pk) for pk in ids])


def event_publish(*, organisation: Organisation, type: EventType | str,
                  data: dict | Callable[[], dict]) -> WebhookEvent | None:
    """Records the event for every enabled endpoint subscribed to ``type``; None when no one is.
    ``data`` may be a function, called only when someone subscribes."""
    endpoints = [e for e in endpoints_for(organisation) if e.subscribes_to(type)]
    if not endpoints:
        return None
    event = WebhookEvent.objects.create(organisation=organisation, type=type,
                                        data=data() if callable(data) else data)
    _queue(WebhookDelivery.objects.bulk_create(
        [WebhookDelivery(endpoint=e, event=event) for e in endpoints]))
    return event


def endpoint_test_send(*, endpoint: WebhookEndpoint) -> WebhookDelivery:
    """A `webhook.test` event to this one endpoint (enabled or not is the caller's check)."""
    with transaction.atomic():
        event = WebhookEvent.objects.create(
            organisation=endpoint.organisation, type=EventType.TEST,
            data={"endpoint": endpoint.reference, "message": "This is a test event from Trainyard."})
        delivery = WebhookDelivery.objects.create(endpoint=endpoint, event=event)
        _queue([delivery])
    return delivery
