"""What the API's quote and order answers read: one query of the columns their output
serializers show, as dicts (no model instances, no catalog joins: ``CatalogSlugField`` names the
catalog rows from the process's catalog; never the encrypted storage keys). For an API key the
query is compiled once per key scope and shape (``portal.core.compiled``)."""

from functools import cache

from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast
from django.shortcuts import get_object_or_404

from portal.accounts.selectors import key_scope, organisations_for, visible_to
from portal.core.compiled import CompiledQuerySet
from portal.orders.models import Order
from portal.quotes.models import Quote

# The catalog rows by id, the organisation's slug and the quote's reference by join.
_CATALOG_IDS = ("sku_id", "nvme_id", "network_id", "storage_provider_id", "strategy_id", "tracker_id")
_STORAGE = ("storage_tb", "storage_retention_days")
QUOTE_COLUMNS = ("reference", "organisation__slug", "node_count", *_CATALOG_IDS, *_STORAGE,
                 "storage_endpoint_url", "storage_bucket", "plan", "price_lines", "price_hourly",
                 "price_monthly", "currency", "valid_until", "created_at")
ORDER_COLUMNS = ("reference", "organisation__slug", "quote__reference", "state", "target_state",
                 "state_changed_at", "rejection_reason", "node_count", *_CATALOG_IDS, *_STORAGE,
                 "price_hourly", "price_monthly", "currency", "created_at", "updated_at")


# The columns are resolved once per process: these templates are only ever filtered (a clone),
# never evaluated themselves.
@cache
def _quotes() -> QuerySet:
    return CompiledQuerySet(Quote).values(*QUOTE_COLUMNS)


@cache
def _orders() -> QuerySet:
    # the plan as its JSON text: every value of an order's row is then hashable, so its answer can
    # be kept by row (OrderOutputSerializer.memo_rows); it is parsed only to answer
    return CompiledQuerySet(Order).values(*ORDER_COLUMNS, plan_json=Cast("plan", TextField()))


def quote_rows(user) -> QuerySet:
    """The quotes ``user`` may see."""
    return _visible(_quotes, user)


def order_rows(user) -> QuerySet:
    """The orders ``user`` may see."""
    return _visible(_orders, user)


MAX_SCOPES = 1024
_scoped: dict[tuple, QuerySet] = {}


def _visible(template, user) -> QuerySet:
    """template() filtered by the tenancy rule; for an API key the filtered query is built once per
    process and key scope (accounts.selectors.key_scope), the root of compiled queries named by that
    scope: the rule's SQL depends on nothing else. Callers get a clone, never the kept one."""
    scope = key_scope(user)
    if scope is None:
        return template().filter(organisation__in=organisations_for(user))
    key = (template, scope)
    rows = _scoped.get(key)
    if rows is None:
        if len(_scoped) >= MAX_SCOPES:
            _scoped.clear()
        rows = _scoped[key] = template().filter(organisation__in=organisations_for(user)).compiled(
            (template.__name__, scope))
    return rows.all()


def quote_row(user, reference: str) -> dict:
    """A quote ``user`` may see; anyone else's is a 404 (never a 403)."""
    return _row(_quotes, user, reference)


def order_row(user, reference: str) -> dict:
    """An order ``user`` may see; anyone else's is a 404 (never a 403)."""
    return _row(_orders, user, reference)


def _row(template, user, reference: str) -> dict:
    """By its unique reference: a key's through its scope's compiled query, a person's with the
    rule on the joined organisation (memberships change: nothing to keep)."""
    if key_scope(user) is not None:
        return get_object_or_404(_visible(template, user), reference=reference)
    return get_object_or_404(template().filter(visible_to(user, "organisation__")), reference=reference)
