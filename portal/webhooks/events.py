"""The event types an endpoint can subscribe to (one list; the API's schema enumerates it)."""

from django.db import models


class EventType(models.TextChoices):
    ORDER_STATE_CHANGED = "order.state_changed", "An order moved to another state"
    SERVER_READY = "server.ready", "An order's servers passed acceptance and are ready"
    ACCEPTANCE_FAILED = "acceptance.failed", "An order's acceptance test failed"
    HEALTH_DEGRADED = "health.degraded", "A server's GPU health check found a problem"
    STORAGE_RETAINED = "storage.retained", "An order's bucket is kept after termination, until a date"
    STORAGE_DELETED = "storage.deleted", "An order's bucket was deleted (retention ended, or dropped)"
    TERMINATION_STALLED = ("termination.stalled", "An order's termination stopped and waits for "
                           "staff (access is already ended; the data is kept)")
    INVOICE_ISSUED = "invoice.issued", "An invoice or credit note was issued (finalised and numbered)"
    SPEND_THRESHOLD = "spend.threshold", "This month's spend reached 50, 80 or 100 % of the limit"
    TEST = "webhook.test", "A test event sent on request"


# What a new endpoint subscribes to when it names nothing (the test event is always deliverable).
SUBSCRIBABLE = [t.value for t in EventType if t != EventType.TEST]
