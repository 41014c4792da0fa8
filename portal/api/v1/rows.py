"""What the API's quote and order answers read: the columns their output serializers show, as
dicts from one query filtered by the one tenancy rule (``visible_to``: a list through
``organisations_for``, one row by its reference directly on the join). No model instances
and no catalog joins (``CatalogSlugField`` names the catalog rows from the process's catalog);
never the encrypted storage keys."""

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from portal.accounts.models import Organisation
from portal.accounts.selectors import organisations_for, visible_to
from portal.catalog.cache import catalog_name
from portal.catalog.selectors import price_basis
from portal.orders.models import Order
from portal.quotes.models import Quote
from portal.quotes.pricing import frozen_price, meter_keys, selling_price

# The catalog rows by id, the organisation's slug and the quote's reference by join.
_CATALOG_IDS = ("sku_id", "nvme_id", "network_id", "storage_provider_id", "strategy_id", "tracker_id")
_STORAGE = ("storage_tb", "storage_retention_days")
_PAYER = ("organisation_id", "organisation__parent_id")  # whose prices a reader sees (``as_seen``)
QUOTE_COLUMNS = (*_PAYER, "reference", "organisation__slug", "node_count", *_CATALOG_IDS, *_STORAGE,
                 "storage_endpoint_url", "storage_bucket", "plan", "price_lines", "price_hourly",
                 "price_monthly", "currency", "valid_until", "created_at")
ORDER_COLUMNS = (*_PAYER, "reference", "organisation__slug", "quote__reference", "state", "target_state",
                 "state_changed_at", "rejection_reason", "node_count", *_CATALOG_IDS, *_STORAGE, "plan",
                 "price_lines", "price_hourly", "price_monthly", "currency", "created_at", "updated_at")
# The column lists resolved once (as DRF's ``queryset`` class attribute is), each read filters a
# clone: resolving 25 columns and their joins cost more than the rest of building the query.
_QUOTES = Quote.objects.values(*QUOTE_COLUMNS)
_ORDERS = Order.objects.values(*ORDER_COLUMNS)


def quote_rows(user) -> QuerySet:
    """The quotes ``user`` may see."""
    return _QUOTES.filter(organisation__in=organisations_for(user))


def order_rows(user) -> QuerySet:
    """The orders ``user`` may see."""
    return _ORDERS.filter(organisation__in=organisations_for(user))


def quote_row(user, reference: str) -> dict:
    """A quote ``user`` may see; anyone else's is a 404 (never a 403)."""
    rows = _QUOTES.filter(visible_to(user, via="organisation__"))
    return as_seen(user, [get_object_or_404(rows, reference=reference)])[0]


def order_row(user, reference: str) -> dict:
    """An order ``user`` may see; anyone else's is a 404 (never a 403)."""
    rows = _ORDERS.filter(visible_to(user, via="organisation__"))
    return as_seen(user, [get_object_or_404(rows, reference=reference)])[0]


def as_seen(user, rows) -> list[dict]:
    """``rows`` (quote or order rows, a page) with their prices as ``user`` reads them: a
    reseller's customer's own keys and members at the reseller's selling prices
    (``price_basis``, ``selling_price``), as its usage is priced; the frozen prices stay in the
    database. No query for a row without a reseller or read by its reseller."""
    rows = list(rows)
    markups: dict = {}
    for row in rows:
        payer = (row["organisation_id"], row["organisation__parent_id"])
        if payer not in markups:
            markups[payer] = payer[1] and price_basis(user, Organisation(pk=payer[0], parent_id=payer[1]))
        if markups[payer]:
            _mark_up(row, markups[payer])
    return rows


def _mark_up(row: dict, markup) -> None:
    server_key, storage_key = meter_keys(sku=catalog_name("sku", row["sku_id"]),
                                         storage=catalog_name("storage", row["storage_provider_id"]),
                                         storage_tb=row["storage_tb"])
    price = selling_price(frozen_price(row["price_hourly"], row["price_monthly"], row["price_lines"]),
                          markup, server_key=server_key, storage_key=storage_key)
    row.update(price_hourly=price.hourly, price_monthly=price.monthly,
               price_lines=[line.to_dict() for line in price.lines])
