"""Retention: deleting what is past its window in short batches (the beat tasks of each app call
this; their rules live in each app's ``retention.py``).

Each batch is its own short transaction: it picks up to ``batch_size`` primary keys matching the
rule and deletes those rows, checking the rule again in the DELETE, so a row that changed
meanwhile (a delivery retried, a run resumed) is not deleted. No transaction stays open across
batches, so a prune of millions of rows never holds locks, or the vacuum horizon, for long; and a
prune cut short is finished by the next run (what is past its window stays past it)."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime, timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import QuerySet
from django.utils import timezone

logger = logging.getLogger(__name__)

# Options of every retention beat task: a database blip retries it with backoff (a run cut short
# loses nothing: the next one deletes what is still past its window).
RETENTION_TASK_OPTIONS = {"autoretry_for": (OperationalError, InterfaceError), "max_retries": 3,
                          "retry_backoff": 5, "retry_backoff_max": 300, "retry_jitter": True}


def retention_cutoff(days: int, *, now: datetime | None = None) -> datetime | None:
    """Rows older than this are past a window of ``days``; None when ``days`` is 0 (kept)."""
    if days < 0:
        raise ValueError(f"a retention window is 0 (keep) or a number of days, not {days}")
    if days == 0:
        return None
    return (now or timezone.now()) - timedelta(days=days)


def delete_in_batches(rows: QuerySet, *, batch_size: int | None = None) -> Counter[str]:
    """Deletes every row of ``rows`` (and what cascades with it), ``batch_size`` primary keys a
    transaction; returns the rows deleted per model label (``webhooks.WebhookAttempt``: 12)."""
    if batch_size is None:
        batch_size = settings.RETENTION_BATCH_SIZE
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    deleted: Counter[str] = Counter()
    # No ORDER BY: the planner picks the cheapest rows matching the rule, not a sorted scan.
    rows = rows.order_by()
    while True:
        with transaction.atomic():
            pks = list(rows.values_list("pk", flat=True)[:batch_size])
            if not pks:
                break
            _, per_model = rows.filter(pk__in=pks).delete()
        deleted.update({label: n for label, n in per_model.items() if n})
    if deleted:
        logger.info("retention: deleted %s", dict(deleted))
    return deleted
