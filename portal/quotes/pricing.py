"""The configurator's price: catalog rows in, priced lines out, through the one price function
(``portal.catalog.pricing.server_price``, which the recommender uses too), with the
paying organisation's price list applied there."""

from __future__ import annotations

from decimal import Decimal

from portal.catalog.pricing import Price, Priced, PriceLine, PriceList, server_price, sold
from portal.quotes.configuration import Configuration, prices_a_bucket


def price(config: Configuration, price_list: PriceList | None = None) -> Price:
    """Price per hour and per month: SKU × nodes, NVMe and network per node, storage per TB;
    ``price_list``: what the organisation pays (``portal.sizing.catalog_live.price_list_for``)."""
    sku, nvme, network = config.sku, config.nvme, config.network
    per_node = [Priced(f"NVMe {nvme.size_tb} TB, {_raid_label(nvme)}", nvme.price_monthly,
                       key=_key("nvme", nvme))]
    if network.price_monthly:
        per_node.append(Priced(network.name, network.price_monthly, key=_key("network", network)))
    shared = ()
    if config.has_priced_storage:
        provider = config.storage_provider
        shared = (Priced(f"Object storage {config.storage_tb} TB ({provider.name})",
                         provider.price_per_tb_monthly, quantity=config.storage_tb,
                         key=_key("storage", provider)),)
    return server_price(nodes=config.node_count,
                        server=Priced(sku.name, sku.price_monthly, sku.price_hourly, key=_key("sku", sku)),
                        per_node=tuple(per_node), shared=shared, price_list=price_list)


def selling_price(price: Price, markup: PriceList | None, *, server_key: str,
                  storage_key: str = "") -> Price:
    """``price`` (at the paying organisation's cost: ``price``, or a frozen quote or order) as a
    reader with ``markup`` (``portal.catalog.selectors.price_basis``) sees it: a reseller's
    customer at the reseller's selling prices, the way its usage is billed; anyone else as it is.
    ``server_key`` (``sku:<slug>``) and ``storage_key`` (``storage:<slug>`` of a priced bucket,
    "" for none): what the markup names them by (``meter_keys``)."""
    if markup is None:
        return price
    return sold(price, markup=markup, server_key=server_key,
                storage_key=storage_key if len(price.lines) > 1 else "")


def meter_keys(*, sku: str, storage: str | None, storage_tb: int) -> tuple[str, str]:
    """(server key, bucket key) of a quote or an order by its slugs: what its two meters (the
    nodes, the bucket) are marked up by; the bucket key "" when it has no priced bucket."""
    return f"sku:{sku}", (f"storage:{storage}" if prices_a_bucket(storage, storage_tb) else "")


def configured_price(config: Configuration, price: Price, markup: PriceList | None) -> Price:
    """The configurator's ``price`` of ``config`` (at the organisation's cost) as a reader with
    ``markup`` sees it, exactly as the quote it freezes will show it to that reader."""
    if markup is None:
        return price
    provider = config.storage_provider
    server_key, storage_key = meter_keys(sku=config.sku.slug, storage=provider.slug if provider else None,
                                         storage_tb=config.storage_tb)
    return selling_price(price, markup, server_key=server_key, storage_key=storage_key)


def frozen_price(hourly, monthly, lines) -> Price:
    """A quote's or an order's frozen price (its JSON lines) as the price function's ``Price``."""
    return Price(lines=tuple(PriceLine(line["label"], Decimal(str(line["hourly"])),
                                       Decimal(str(line["monthly"]))) for line in lines or ()),
                 hourly=Decimal(hourly), monthly=Decimal(monthly))


def shown_price(priced, markup: PriceList | None) -> Price:
    """A Quote's or an Order's price as a reader with ``markup`` sees it (``selling_price``); its
    ``sku`` and ``storage_provider`` read through the instance (select them with it)."""
    if markup is None:
        return frozen_price(priced.price_hourly, priced.price_monthly, priced.price_lines)
    provider = priced.storage_provider.slug if priced.storage_provider_id else None
    server_key, storage_key = meter_keys(sku=priced.sku.slug, storage=provider,
                                         storage_tb=priced.storage_tb)
    return selling_price(frozen_price(priced.price_hourly, priced.price_monthly, priced.price_lines),
                         markup, server_key=server_key, storage_key=storage_key)


def _key(kind: str, item) -> str:
    return f"{kind}:{getattr(item, 'slug', '')}"


def _raid_label(nvme) -> str:
    display = getattr(nvme, "get_raid_display", None)
    return display() if callable(display) else str(nvme.raid)


def unit_price(kind: str, item, amount, price_list: PriceList | None):
    """One catalog unit price (``kind``: sku, nvme, network, storage) as ``price_list`` charges it:
    the number the catalog and the configurator's choices show, the same the quote multiplies."""
    if price_list is None or amount is None:
        return amount
    return price_list.unit(_key(kind, item), amount)


def paid_prices(price_list: PriceList | None, *, skus=(), nvme=(), network=(), storage=()) -> None:
    """Sets ``paid_hourly`` / ``paid_monthly`` / ``paid_per_tb_monthly`` on rows fetched for a
    page: what the viewer's organisation pays (its or its reseller's price list)."""
    for sku in skus:
        sku.paid_hourly = unit_price("sku", sku, sku.price_hourly, price_list)
        sku.paid_monthly = unit_price("sku", sku, sku.price_monthly, price_list)
    for option, kind in [*((o, "nvme") for o in nvme), *((o, "network") for o in network)]:
        option.paid_monthly = unit_price(kind, option, option.price_monthly, price_list)
    for provider in storage:
        provider.paid_per_tb_monthly = unit_price("storage", provider, provider.price_per_tb_monthly,
                                                  price_list)
