"""What the API's quote and order answers read: the columns their output serializers show, as
dicts from one query filtered by the one tenancy rule (``visible_to``: a list through
``organisations_for``, one row by its reference directly on the join). No model instances
and no catalog joins (``CatalogSlugField`` names the catalog rows from the process's catalog);
never the encrypted storage keys."""

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


def quote_rows(user) -> QuerySet:
    """The quotes ``user`` may see."""
    return Quote.objects.filter(organisation__in=organisations_for(user)).values(*QUOTE_COLUMNS)


def order_rows(user) -> QuerySet:
    """The orders ``user`` may see."""
    return Order.objects.filter(organisation__in=organisations_for(user)).values(*ORDER_COLUMNS)


def quote_row(user, reference: str) -> dict:
    """A quote ``user`` may see; anyone else's is a 404 (never a 403)."""
    rows = Quote.objects.filter(visible_to(user, via="organisation__")).values(*QUOTE_COLUMNS)
    return get_object_or_404(rows, reference=reference)


def order_row(user, reference: str) -> dict:
    """An order ``user`` may see; anyone else's is a 404 (never a 403)."""
    rows = Order.objects.filter(visible_to(user, via="organisation__")).values(*ORDER_COLUMNS)
    return get_object_or_404(rows, reference=reference)
