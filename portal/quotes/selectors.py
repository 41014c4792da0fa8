from django.db.models import QuerySet

from portal.accounts.selectors import organisations_for
from portal.catalog.models import StackOption
from portal.catalog.selectors import sku_list
from portal.quotes.models import Quote
from portal.quotes.rules import stock_text


def sku_stock(sku) -> int | None:
    """Ready nodes of this SKU (None for a SKU no longer sold)."""
    if hasattr(sku, "stock"):
        return sku.stock
    row = sku_list().filter(pk=sku.pk).first()
    return row.stock if row is not None else None


def stock_note(sku, *, requested: int) -> str:
    """What the pages say when fewer nodes of ``sku`` are ready than ``requested`` ("" if enough)."""
    return stock_text(sku.name, ready=sku_stock(sku), requested=requested)


def strategy_stacks() -> tuple:
    """The catalog's training stacks with their capabilities, in catalog order."""
    return tuple(StackOption.objects.filter(kind=StackOption.Kind.STRATEGY))


def quotes_visible(*, organisations) -> QuerySet[Quote]:
    return Quote.objects.filter(organisation__in=organisations).select_related(
        "organisation", "sku__gpu", "nvme", "network", "storage_provider", "strategy", "tracker")


def quote_for_user(*, user, reference: str) -> Quote | None:
    """A quote of one of the user's organisations (None for anyone else: the view says 404)."""
    return quotes_visible(organisations=organisations_for(user)).filter(reference=reference).first()
