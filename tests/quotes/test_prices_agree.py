"""One price: the recommender's hourly price of a server size is the configurator's, to the cent,
for every seeded SKU and every NVMe, network and storage option."""

from decimal import Decimal

import pytest

from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU, StorageProvider
from portal.catalog.pricing import HOURS_PER_MONTH
from portal.quotes.configuration import Configuration
from portal.quotes.pricing import price
from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.catalog_live import catalog_from_db
from portal.sizing.recommend.search import size_price

STORAGE_TB = 7


@pytest.mark.parametrize("source", ["database", "seed"])
def test_recommender_and_configurator_agree_on_every_sku_and_option(catalog, source):
    data = catalog_from_db() if source == "database" else catalog_from_seed()
    nvme = {o.slug: o for o in data.nvme}
    networks = {o.slug: o for o in data.networks}
    storage = {o.slug: o for o in data.storage}
    checked = 0
    for sku_row in ServerSKU.objects.filter(is_active=True):
        sku = data.sku(sku_row.slug)
        for nodes in (1, 2):
            for nvme_row in NvmeOption.objects.all():
                for network_row in NetworkOption.objects.all():
                    for provider_row in [None, *StorageProvider.objects.all()]:
                        tb = STORAGE_TB if provider_row else 0
                        quoted = price(Configuration(sku=sku_row, nvme=nvme_row, network=network_row,
                                                     node_count=nodes, storage_provider=provider_row,
                                                     storage_tb=tb)).hourly
                        recommended = size_price(
                            sku, nodes, networks[network_row.slug], nvme[nvme_row.slug],
                            storage[provider_row.slug] if provider_row else None, tb).hourly
                        assert Decimal(str(recommended)) == quoted, (sku.slug, nodes, nvme_row.slug,
                                                                     network_row.slug, provider_row)
                        checked += 1
    assert checked > 1000


def test_hours_per_month_is_defined_once():
    assert HOURS_PER_MONTH == Decimal("730")
