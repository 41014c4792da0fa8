"""Sending one delivery (I/O: call from the task): claim it, POST the signed body, log the attempt,
then say when to try again. A failing endpoint is disabled once it has failed for
WEBHOOK_DISABLE_AFTER_S (24 h) and its organisation's admins are told."""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from datetime import timedelta

import requests
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.core.addresses import guarded_session, unsafe_cause
from portal.core.metrics import WEBHOOK_DELIVERIES
from portal.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from portal.webhooks.notifications import endpoint_disabled_notify
from portal.webhooks.signing import HEADER, signature_header

USER_AGENT = "Trainyard-Webhooks/1"
# An early duplicate of a scheduled retry waits for its own turn (clock skew allowed).
EARLY_SLACK = timedelta(seconds=2)


@dataclass(frozen=True)
class AttemptOutcome:
    status_code: int | None
    duration_ms: int
    error: str

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def event_body(delivery: WebhookDelivery) -> bytes:
    """The JSON body of a delivery: the same bytes on every attempt."""
    event = delivery.event
    return json.dumps({"id": event.reference, "type": event.type,
                       "created_at": event.created_at.isoformat().replace("+00:00", "Z"),
                       "organisation": event.organisation.slug, "data": event.data},
                      sort_keys=True, separators=(",", ":")).encode()


def backoff_s(attempts: int) -> float:
    """Seconds before attempt ``attempts + 1``: exponential from WEBHOOK_RETRY_BASE_S, capped at
    WEBHOOK_RETRY_MAX_S, with jitter (50–100 %) so retries of many deliveries spread out."""
    raw = min(settings.WEBHOOK_RETRY_BASE_S * 2 ** (attempts - 1), settings.WEBHOOK_RETRY_MAX_S)
    return raw * random.uniform(0.5, 1.0)


def _claim(delivery_id: int) -> WebhookDelivery | None:
    now = timezone.now()
    claimed = (WebhookDelivery.objects
               .filter(pk=delivery_id, state=WebhookDelivery.State.PENDING, endpoint__enabled=True,
                       next_attempt_at__lte=now + EARLY_SLACK)
               .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
               .update(claimed_until=now + timedelta(seconds=settings.WEBHOOK_TIMEOUT_S + 30)))
    if claimed != 1:
        return None
    return (WebhookDelivery.objects.select_related("endpoint", "event__organisation")
            .get(pk=delivery_id))


def _send(endpoint: WebhookEndpoint, delivery: WebhookDelivery, body: bytes) -> AttemptOutcome:
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT,
               HEADER: signature_header(endpoint.secret, int(time.time()), body),
               "Trainyard-Event": delivery.event.type, "Trainyard-Delivery": str(delivery.pk)}
    started = time.monotonic()
    try:
        with guarded_session() as session:
            response = session.post(endpoint.url, data=body, headers=headers, allow_redirects=False,
                                    timeout=(min(5.0, settings.WEBHOOK_TIMEOUT_S),
                                             settings.WEBHOOK_TIMEOUT_S))
    except requests.RequestException as exc:
        return AttemptOutcome(None, _ms_since(started), _error_text(exc))
    error = "" if 200 <= response.status_code < 300 else f"HTTP {response.status_code}"
    return AttemptOutcome(response.status_code, _ms_since(started), error)


def _error_text(exc: requests.RequestException) -> str:
    """What the log shows: the refusal of an unsafe address in its own words."""
    unsafe = unsafe_cause(exc)
    return (str(unsafe) if unsafe is not None else f"{type(exc).__name__}: {exc}")[:500]


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def delivery_attempt(*, delivery_id: int) -> float | None:
    """Makes one attempt; returns seconds until the next, or None when done (delivered, given up,
    disabled, or not this call's to send)."""
    delivery = _claim(delivery_id)
    if delivery is None:
        return None
    outcome = _send(delivery.endpoint, delivery, event_body(delivery))
    return _record(delivery, outcome)


def _record(delivery: WebhookDelivery, outcome: AttemptOutcome) -> float | None:
    now = timezone.now()
    number = delivery.attempts + 1
    retry_in = None
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=delivery.endpoint_id)
        WebhookAttempt.objects.create(delivery=delivery, number=number, at=now,
                                      status_code=outcome.status_code,
                                      duration_ms=outcome.duration_ms, error=outcome.error)
        if outcome.succeeded:
            state = WebhookDelivery.State.SUCCEEDED
            if endpoint.failing_since is not None:
                endpoint.failing_since = None
                endpoint.save(update_fields=["failing_since", "updated_at"])
        else:
            endpoint.failing_since = endpoint.failing_since or now
            failing_for = (now - endpoint.failing_since).total_seconds()
            if failing_for >= settings.WEBHOOK_DISABLE_AFTER_S:
                _disable(endpoint, now=now, failing_for_s=failing_for)
                state = WebhookDelivery.State.FAILED
            else:
                endpoint.save(update_fields=["failing_since", "updated_at"])
                retry_in = backoff_s(number)
                window_ends = delivery.created_at + timedelta(seconds=settings.WEBHOOK_RETRY_WINDOW_S)
                state = WebhookDelivery.State.PENDING
                if now + timedelta(seconds=retry_in) > window_ends:
                    state, retry_in = WebhookDelivery.State.FAILED, None
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            attempts=number, state=state, claimed_until=None,
            next_attempt_at=now + timedelta(seconds=retry_in or 0))
    WEBHOOK_DELIVERIES.labels(result="retrying" if state == WebhookDelivery.State.PENDING
                              else state.value).inc()
    return retry_in


def _disable(endpoint: WebhookEndpoint, *, now, failing_for_s: float) -> None:
    hours = failing_for_s / 3600
    endpoint.enabled = False
    endpoint.disabled_reason = (f"Disabled automatically on {now:%Y-%m-%d %H:%M} UTC: every "
                                f"delivery failed for {hours:.0f} hours.")
    endpoint.save(update_fields=["enabled", "disabled_reason", "failing_since", "updated_at"])
    WebhookDelivery.objects.filter(endpoint=endpoint, state=WebhookDelivery.State.PENDING).update(
        state=WebhookDelivery.State.FAILED, claimed_until=None)
    endpoint_id = endpoint.pk
    transaction.on_commit(lambda: endpoint_disabled_notify(endpoint_id=endpoint_id))


# A pending delivery this overdue, and claimed by no one, lost its Celery message (a broker
# restart, a worker killed before acks_late could return it): the sweep queues it again.
LOST_AFTER = timedelta(minutes=2)


def deliveries_overdue(*, now=None, limit: int = 500) -> list[int]:
    """Ids of pending deliveries to queue again (oldest due first). A delivery whose retry
    window has closed meanwhile is given up instead of sent. Queuing one that still has its
    message is harmless: the first to claim it sends it."""
    now = now or timezone.now()
    overdue = (WebhookDelivery.objects
               .filter(state=WebhookDelivery.State.PENDING, endpoint__enabled=True,
                       next_attempt_at__lt=now - LOST_AFTER)
               .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)))
    window_opened = now - timedelta(seconds=settings.WEBHOOK_RETRY_WINDOW_S)
    overdue.filter(created_at__lt=window_opened).update(state=WebhookDelivery.State.FAILED)
    return list(overdue.filter(created_at__gte=window_opened).order_by("next_attempt_at", "pk")
                .values_list("pk", flat=True)[:limit])
