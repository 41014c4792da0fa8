"""Retention of quotes (beat task ``orders.retention``; QUOTE_RETENTION_DAYS).

A quote nobody ordered is deleted once it has been expired for the window. An ordered quote is
kept: its order names it ("from quote Q-…", the API's ``quote``). Orders themselves, and their
transition events (the audit trail), are never pruned. This lives in orders, not quotes, because
"ordered" is the orders' knowledge (quotes sit below orders)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.conf import settings
from django.db.models import Exists, OuterRef

from portal.core.retention import delete_in_batches, retention_cutoff
from portal.orders.models import Order
from portal.quotes.models import Quote


def quotes_prune(*, now: datetime, batch_size: int | None = None) -> Counter[str]:
    cutoff = retention_cutoff(settings.QUOTE_RETENTION_DAYS, now=now)
    if cutoff is None:
        return Counter()
    ordered = Exists(Order.objects.filter(quote=OuterRef("pk")))
    return delete_in_batches(Quote.objects.filter(~ordered, valid_until__lt=cutoff),
                             batch_size=batch_size)
