"""Quote retention: a quote nobody ordered goes once expired for QUOTE_RETENTION_DAYS; an ordered
quote stays with its order (the order names it), whatever its age."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from portal.orders.retention import quotes_prune
from portal.orders.states import OrderState
from portal.quotes.models import Quote
from tests.factories import make_order, make_quote

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]


def _expired(quote, ago: timedelta) -> Quote:
    Quote.objects.filter(pk=quote.pk).update(valid_until=timezone.now() - ago)
    return quote


def test_unordered_quotes_expired_past_the_window_go(people):
    window = timedelta(days=settings.QUOTE_RETENTION_DAYS)
    gone = _expired(make_quote(people.acme), window + timedelta(minutes=5))
    inside = _expired(make_quote(people.acme), window - timedelta(minutes=5))
    valid = make_quote(people.acme)
    order = make_order(people.acme, state=OrderState.TERMINATED)
    ordered = _expired(order.quote, window + timedelta(days=400))

    assert quotes_prune(now=timezone.now()) == {"quotes.Quote": 1}
    assert set(Quote.objects.values_list("pk", flat=True)) == {inside.pk, valid.pk, ordered.pk}
    assert not Quote.objects.filter(pk=gone.pk).exists()
    order.refresh_from_db()
    assert order.quote_id == ordered.pk
    assert quotes_prune(now=timezone.now()) == {}


def test_in_batches_smaller_than_the_rows(people, settings):
    settings.RETENTION_BATCH_SIZE = 3
    for _ in range(5):
        _expired(make_quote(people.acme), timedelta(days=settings.QUOTE_RETENTION_DAYS + 1))
    assert quotes_prune(now=timezone.now()) == {"quotes.Quote": 5}
    assert not Quote.objects.exists()
