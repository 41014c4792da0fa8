"""The catalog as the database holds it: read now, or kept in memory per process until it
changes (portal.catalog.cache), with ready nodes per SKU, priced as an organisation pays."""

from __future__ import annotations

from dataclasses import replace

from portal.catalog.cache import catalog_cached as cached
from portal.catalog.cache import catalog_rows, catalog_rows_now, sku_stock
from portal.catalog.pricing import PriceList
from portal.sizing.catalog_data import catalog_from_rows, catalog_priced
from portal.sizing.recommend.catalog import CatalogData


def catalog_from_db() -> CatalogData:
    """The active catalog as stored (prices as the operator set them), read now, with stock."""
    return catalog_from_rows(catalog_rows_now(), stock=sku_stock())


def catalog_cached(*, stock: bool = True, price_list: PriceList | None = None) -> CatalogData:
    """The catalog as kept in memory until it changes; ``stock``: with ready nodes per SKU read
    now (one query); ``price_list``: prices as that organisation pays them."""
    data = cached("sizing.catalog_data", lambda: catalog_from_rows(catalog_rows()))
    if price_list is not None:
        data = cached(("sizing.catalog_data", price_list), lambda: catalog_priced(data, price_list))
    if stock:
        counts = sku_stock()
        data = replace(data, skus=tuple(replace(s, stock_nodes=counts.get(s.slug, 0)) for s in data.skus))
    return data


def _price_lists() -> dict[int, PriceList]:
    return {row.organisation_id: PriceList(
        percent=row.percent, name=row.organisation.slug,
        items=tuple((item.key, item.percent) for item in row.items.all()))
        for row in catalog_rows().price_lists}


def price_list_for(organisation) -> PriceList | None:
    """What ``organisation`` pays: its own price list, else its reseller's (a reseller's customer
    pays the reseller's list); None: the list prices."""
    if organisation is None:
        return None
    lists = cached("sizing.price_lists", _price_lists)
    return lists.get(organisation.pk) or lists.get(getattr(organisation, "parent_id", None))
