"""The catalog links each server to the configurator with it chosen, sorts by price, GPU memory
and GPU count, and the configurator starts from a small server, not the biggest one."""

import re

import pytest

from portal.catalog.models import ServerSKU
from tests.factories import make_node


def _server_order(html):
    return re.findall(r'href="/configure/\?sku=([a-z0-9-]+)">', html)


def test_each_row_links_to_the_configurator_with_its_sku(client, catalog):
    html = client.get("/catalog/").content.decode()
    linked = set(_server_order(html))
    assert linked == set(ServerSKU.objects.filter(is_active=True).values_list("slug", flat=True))
    page = client.get("/configure/", {"sku": "4x-h100-pcie-80gb"}).content.decode()
    assert 'value="4x-h100-pcie-80gb" selected' in page


@pytest.mark.parametrize(("sort", "key"), [
    ("price", lambda s: s.price_hourly), ("-price", lambda s: -s.price_hourly),
    ("memory", lambda s: -s.gpu.memory_gb), ("gpus", lambda s: -s.gpu_count)])
def test_the_list_sorts_by_price_memory_and_gpus(client, catalog, sort, key):
    html = client.get("/catalog/", {"sort": sort}).content.decode()
    shown = list(dict.fromkeys(_server_order(html)))
    skus = {s.slug: s for s in ServerSKU.objects.select_related("gpu")}
    values = [key(skus[slug]) for slug in shown]
    assert values == sorted(values) and len(shown) == len(skus)
    assert f'<option value="{sort}" selected>' in html


def test_sorting_keeps_the_filters_and_an_unknown_sort_is_named(client, catalog):
    html = client.get("/catalog/", {"gpus": "8", "sort": "price"}).content.decode()
    shown = _server_order(html)
    assert shown and all(slug.startswith("8x-") for slug in shown)
    bad = client.get("/catalog/", {"sort": "nonsense"}).content.decode()
    assert "Select a valid choice. nonsense is not one of the available choices." in bad
    assert "No server matches" not in client.get("/catalog/", {"sort": "price"}).content.decode()


def test_the_configurator_starts_from_the_cheapest_one_gpu_server_with_stock(client, catalog, sim_dir):
    html = client.get("/configure/").content.decode()
    cheapest_single = ServerSKU.objects.filter(gpu_count=1).order_by("price_hourly").first()
    assert f'value="{cheapest_single.slug}" selected' in html  # none in stock: the cheapest one-GPU
    make_node(sku="1x-l4-24gb", state_dir=sim_dir)
    html = client.get("/configure/").content.decode()
    assert 'value="1x-l4-24gb" selected' in html  # the cheapest one-GPU server with a node ready
    assert 'value="8x-a100-sxm-40gb" selected' not in html
