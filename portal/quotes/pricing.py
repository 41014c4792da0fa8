"""The configurator's price: catalog rows in, priced lines out, through the one price function
(``portal.sizing.recommend.pricing.server_price``, which the recommender uses too)."""

from __future__ import annotations

from portal.quotes.configuration import Configuration
from portal.sizing.recommend.pricing import Price, Priced, server_price


def price(config: Configuration) -> Price:
    """Price per hour and per month: SKU × nodes, NVMe and network per node, storage per TB."""
    sku, nvme, network = config.sku, config.nvme, config.network
    per_node = [Priced(f"NVMe {nvme.size_tb} TB, {_raid_label(nvme)}", nvme.price_monthly)]
    if network.price_monthly:
        per_node.append(Priced(network.name, network.price_monthly))
    shared = ()
    if config.storage_provider is not None and config.storage_tb:
        provider = config.storage_provider
        shared = (Priced(f"Object storage {config.storage_tb} TB ({provider.name})",
                         provider.price_per_tb_monthly, quantity=config.storage_tb),)
    return server_price(nodes=config.node_count, server=Priced(sku.name, sku.price_monthly, sku.price_hourly),
                        per_node=tuple(per_node), shared=shared)


def _raid_label(nvme) -> str:
    display = getattr(nvme, "get_raid_display", None)
    return display() if callable(display) else str(nvme.raid)
