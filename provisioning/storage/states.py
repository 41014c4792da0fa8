"""A bucket's life: active (the order uses it) → retained (kept after termination until a date)
→ deleted. The one place that lists the allowed moves; no I/O here."""

from __future__ import annotations

from django.db import models

from portal.core.states import Transition, TransitionTable


class BucketState(models.TextChoices):
    ACTIVE = "active", "Active"
    RETAINED = "retained", "Retained"
    DELETED = "deleted", "Deleted"


B = BucketState
BUCKET_TRANSITIONS = TransitionTable("bucket", [
    # retained → retained: staff extend (or shorten) the retention date.
    Transition("retain", frozenset({B.ACTIVE, B.RETAINED}), B.RETAINED, "Kept after termination"),
    Transition("reactivate", frozenset({B.RETAINED}), B.ACTIVE, "In use again"),
    Transition("delete", frozenset({B.RETAINED}), B.DELETED, "Deleted after its retention date"),
    # Staff drop storage from an order that never ran (the bucket holds no checkpoints).
    Transition("drop", frozenset({B.ACTIVE}), B.DELETED, "Dropped from the order"),
], labels=dict(BucketState.choices))
