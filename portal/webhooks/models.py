"""Webhook endpoints, the events published to them, and every delivery attempt."""

import secrets

from django.db import models
from django.utils import timezone

from portal.core.crypto import EncryptedTextField
from portal.webhooks.events import SUBSCRIBABLE, EventType


def _endpoint_reference() -> str:
    return "WH-" + secrets.token_hex(4).upper()


def _event_reference() -> str:
    return "evt_" + secrets.token_hex(12)


def _default_event_types() -> list[str]:
    return list(SUBSCRIBABLE)


class WebhookEndpoint(models.Model):
    """Where an organisation wants its events POSTed. A reseller's endpoint also receives the
    events of its customer organisations. The secret signs each body and is shown once."""

    reference = models.CharField(max_length=12, unique=True, default=_endpoint_reference,
                                 editable=False)
    organisation = models.ForeignKey("accounts.Organisation", on_delete=models.CASCADE,
                                     related_name="webhook_endpoints")
    url = models.URLField(max_length=500)
    description = models.CharField(max_length=200, blank=True)
    event_types = models.JSONField(default=_default_event_types)
    secret = EncryptedTextField()
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=300, blank=True)
    failing_since = models.DateTimeField(null=True, blank=True,
                                         help_text="First failed attempt since the last success.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.reference} {self.url}"

    def subscribes_to(self, event_type: str) -> bool:
        return event_type == EventType.TEST or event_type in self.event_types


class WebhookEvent(models.Model):
    """One thing that happened, with the JSON body every endpoint receives for it."""

    reference = models.CharField(max_length=40, unique=True, default=_event_reference,
                                 editable=False)
    organisation = models.ForeignKey("accounts.Organisation", on_delete=models.CASCADE,
                                     related_name="+", help_text="Whose data the event is about.")
    type = models.CharField(max_length=40, choices=EventType.choices)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)  # retention's window

    def __str__(self) -> str:
        return f"{self.reference} {self.type}"


class WebhookDelivery(models.Model):
    """One event on its way to one endpoint: retried with backoff until it succeeds, 24 hours
    have passed, or the endpoint is disabled."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed (gave up)"

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    state = models.CharField(max_length=12, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    claimed_until = models.DateTimeField(null=True, blank=True,
                                         help_text="A worker is sending it until then.")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["endpoint", "event"],
                                               name="one_delivery_per_endpoint_and_event")]

    def __str__(self) -> str:
        return f"{self.event} → {self.endpoint}"


class WebhookAttempt(models.Model):
    """The delivery log: one row per HTTP attempt."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="log")
    number = models.PositiveIntegerField()
    at = models.DateTimeField(default=timezone.now)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"],
                                               name="one_log_row_per_attempt")]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.delivery}"

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300
