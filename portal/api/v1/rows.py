"""What the API's quote and order answers read: one query of the columns their output
serializers show, as dicts (no model instances, no catalog joins: ``CatalogSlugField`` names the
catalog rows from the process's catalog; never the encrypted storage keys)."""

from functools import cache

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from portal.accounts.selectors import organisations_for, visible_to
from portal.orders.models import Order
from portal.quotes.models import Quote

# The catalog rows by id, the organisation's slug and the quote's reference by join.
_CATALOG_IDS = ("sku_id", "nvme_id", "network_id", "storage_provider_id", "strategy_id", "tracker_id")
_STORAGE = ("storage_tb", "storage_retention_days")
QUOTE_COLUMNS = ("reference", "organisation__slug", "node_count", *_CATALOG_IDS, *_STORAGE,
                 "storage_endpoint_url", "storage_bucket", "plan", "price_lines", "price_hourly",
                 "price_monthly", "currency", "valid_until", "created_at")
ORDER_COLUMNS = ("reference", "organisation__slug", "quote__reference", "state", "target_state",
                 "state_changed_at", "rejection_reason", "node_count", *_CATALOG_IDS, *_STORAGE, "plan",
                 "price_hourly", "price_monthly", "currency", "created_at", "updated_at")


# The columns are resolved once per process: these templates are only ever filtered (a clone),
# never evaluated themselves.
@cache
def _quotes() -> QuerySet:
    return Quote.objects.values(*QUOTE_COLUMNS)


@cache
def _orders() -> QuerySet:
    return Order.objects.values(*ORDER_COLUMNS)


def quote_rows(user) -> QuerySet:
    """The quotes ``user`` may see."""
    return _quotes().filter(organisation__in=organisations_for(user))


def order_rows(user) -> QuerySet:
    """The orders ``user`` may see."""
    return _orders().filter(organisation__in=organisations_for(user))


def quote_row(user, reference: str) -> dict:
    """A quote ``user`` may see; anyone else's is a 404 (never a 403)."""
    return get_object_or_404(_quotes().filter(visible_to(user, "organisation__")), reference=reference)


def order_row(user, reference: str) -> dict:
    """An order ``user`` may see; anyone else's is a 404 (never a 403)."""
    return get_object_or_404(_orders().filter(visible_to(user, "organisation__")), reference=reference)
