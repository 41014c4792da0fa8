"""The configurator's price: catalog rows in, priced lines out, through the one price function
(``portal.catalog.pricing.server_price``, which the recommender uses too), with the
paying organisation's price list applied there."""

from __future__ import annotations

from portal.catalog.pricing import Price, Priced, PriceList, server_price
from portal.quotes.configuration import Configuration


def price(config: Configuration, price_list: PriceList | None = None) -> Price:
    """Price per hour and per month: SKU × nodes, NVMe and network per node, storage per TB;
    ``price_list``: what the organisation pays (``portal.sizing.catalog_data.price_list_for``)."""
    sku, nvme, network = config.sku, config.nvme, config.network
    per_node = [Priced(f"NVMe {nvme.size_tb} TB, {_raid_label(nvme)}", nvme.price_monthly,
                       key=_key("nvme", nvme))]
    if network.price_monthly:
        per_node.append(Priced(network.name, network.price_monthly, key=_key("network", network)))
    shared = ()
    if config.storage_provider is not None and config.storage_tb:
        provider = config.storage_provider
        shared = (Priced(f"Object storage {config.storage_tb} TB ({provider.name})",
                         provider.price_per_tb_monthly, quantity=config.storage_tb,
                         key=_key("storage", provider)),)
    return server_price(nodes=config.node_count,
                        server=Priced(sku.name, sku.price_monthly, sku.price_hourly, key=_key("sku", sku)),
                        per_node=tuple(per_node), shared=shared, price_list=price_list)


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
