"""Writes on webhook endpoints: create (the secret is returned once), update, rotate, delete."""

from __future__ import annotations

import secrets

from django.core.exceptions import ValidationError
from django.db import transaction

from portal.accounts.models import Organisation
from portal.core.addresses import url_problem
from portal.webhooks.events import SUBSCRIBABLE
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint

SECRET_PREFIX = "whsec_"


def _new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def endpoint_url_check(url: str) -> str:
    """The URL, or ValidationError: the portal's one rule for addresses it connects to for a
    customer or reseller (``portal.core.addresses``: https to a public address, or an address
    in OUTBOUND_ALLOWED_NETWORKS). Every delivery checks the address again."""
    problem = url_problem(url)
    if problem:
        raise ValidationError({"url": [problem]})
    return url


def event_types_check(event_types: list[str] | None) -> list[str]:
    if event_types is None:
        return list(SUBSCRIBABLE)
    unknown = sorted(set(event_types) - set(SUBSCRIBABLE))
    if unknown:
        raise ValidationError({"event_types": [f"Unknown event type(s) {', '.join(unknown)}; "
                                               f"choose from {', '.join(SUBSCRIBABLE)}."]})
    if not event_types:
        raise ValidationError({"event_types": ["Subscribe to at least one event type."]})
    return sorted(set(event_types), key=SUBSCRIBABLE.index)


def endpoint_create(*, organisation: Organisation, url: str, event_types: list[str] | None = None,
                    description: str = "") -> tuple[WebhookEndpoint, str]:
    """A new enabled endpoint and its signing secret (returned here once; stored encrypted)."""
    secret = _new_secret()
    endpoint = WebhookEndpoint.objects.create(
        organisation=organisation, url=endpoint_url_check(url), description=description,
        event_types=event_types_check(event_types), secret=secret)
    return endpoint, secret


def endpoint_update(*, endpoint: WebhookEndpoint, url: str | None = None,
                    event_types: list[str] | None = None, description: str | None = None,
                    enabled: bool | None = None) -> WebhookEndpoint:
    """Changes what is given. Enabling a disabled endpoint clears its failure record."""
    if url is not None:
        endpoint.url = endpoint_url_check(url)
    if event_types is not None:
        endpoint.event_types = event_types_check(event_types)
    if description is not None:
        endpoint.description = description
    if enabled is not None and enabled != endpoint.enabled:
        endpoint.enabled = enabled
        endpoint.failing_since = None
        endpoint.disabled_reason = "" if enabled else "Disabled by the organisation."
    endpoint.save()
    return endpoint


def endpoint_rotate_secret(*, endpoint: WebhookEndpoint) -> str:
    """A new signing secret, used from the next attempt on; returned once."""
    secret = _new_secret()
    endpoint.secret = secret
    endpoint.save(update_fields=["secret", "updated_at"])
    return secret


def endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    with transaction.atomic():
        WebhookDelivery.objects.filter(endpoint=endpoint, state=WebhookDelivery.State.PENDING).update(
            state=WebhookDelivery.State.FAILED)
        endpoint.delete()

