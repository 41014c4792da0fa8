from django.db.models import QuerySet

from portal.accounts.selectors import organisations_for, primary_organisation
from portal.catalog.models import StackOption
from portal.catalog.pricing import PriceList, resold
from portal.catalog.selectors import price_basis, sku_list
from portal.quotes.models import Quote
from portal.quotes.pricing import shown_price
from portal.quotes.rules import stock_text
from portal.sizing.catalog_live import price_list_for


def price_list_of_user(user) -> PriceList | None:
    """What the catalog shows a signed-in member or key: its organisation's unit prices
    (``unit_prices_for``; None: list prices)."""
    if not user.is_authenticated or getattr(user, "is_hosting_staff", False):
        return None
    return unit_prices_for(user, primary_organisation(user))


def unit_prices_for(viewer, organisation) -> PriceList | None:
    """The catalog's unit prices as ``viewer`` sees them for ``organisation``: what it pays (its
    or its reseller's price list), and for a reseller's customer's own people the reseller's
    markup on that (``price_basis``), as its quotes, orders and usage show them."""
    return unit_prices(organisation, price_basis(viewer, organisation))


def unit_prices(organisation, basis: PriceList | None) -> PriceList | None:
    """``organisation``'s unit prices (its or its reseller's price list) at the markup ``basis``
    (``price_basis``) it is read with."""
    return resold(price_list_for(organisation), basis)


def shown_prices(viewer, priced) -> None:
    """Sets ``shown`` (a ``Price``) on each quote or order of ``priced`` (a page of a list, with
    their organisation, SKU, storage provider and price lines): its price as ``viewer`` reads it
    (``portal.quotes.pricing.shown_price``). One markup read per organisation on the page."""
    markups: dict = {}
    for row in priced:
        if row.organisation_id not in markups:
            markups[row.organisation_id] = price_basis(viewer, row.organisation)
        row.shown = shown_price(row, markups[row.organisation_id])


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
