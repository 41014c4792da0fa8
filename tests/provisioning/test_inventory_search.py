"""The inventory and the catalog paginate and search (hostname, SKU, state)."""

from portal.catalog.models import ServerSKU
from tests.factories import H100_SKU, L4_SKU, make_node


def test_nodes_search_by_hostname_address_and_sku(people, catalog, sim_dir, login):
    make_node(sku=H100_SKU, state_dir=sim_dir, hostname="rack1-h100")
    make_node(sku=L4_SKU, state_dir=sim_dir, hostname="rack2-l4")
    client = login(people.olga)
    html = client.get("/ops/nodes/", {"q": "rack1"}).content.decode()
    assert "rack1-h100" in html and "rack2-l4" not in html
    html = client.get("/ops/nodes/", {"q": "l4"}).content.decode()
    assert "rack2-l4" in html and "rack1-h100" not in html
    html = client.get("/ops/nodes/", {"q": "nothing-like-it"}).content.decode()
    assert "No node matches this filter" in html


def test_nodes_paginate_and_keep_the_filter(people, catalog, sim_dir, login):
    for n in range(55):
        make_node(sku=H100_SKU, state_dir=sim_dir, hostname=f"gpu-h-{n:03d}")
    make_node(sku=L4_SKU, state_dir=sim_dir, hostname="gpu-l4-000", state="maintenance")
    client = login(people.olga)
    first = client.get("/ops/nodes/", {"state": "ready"}).content.decode()
    assert "Page 1 of 2 · 55 in all" in first and "gpu-h-000" in first and "gpu-h-054" not in first
    assert "state=ready&amp;page=2" in first
    second = client.get("/ops/nodes/", {"state": "ready", "page": 2}).content.decode()
    assert "gpu-h-054" in second and "gpu-l4-000" not in second


def test_catalog_search_and_pages(client, catalog, monkeypatch):
    html = client.get("/catalog/", {"q": "H100"}).content.decode()
    names = [s.name for s in ServerSKU.objects.filter(is_active=True)]
    assert "H100" in html and all("L4" not in name or name not in html for name in names)
    assert "No server matches these filters" in client.get("/catalog/", {"q": "zzz"}).content.decode()
    monkeypatch.setattr("portal.catalog.views.SKUS_PER_PAGE", 10)
    total = ServerSKU.objects.filter(is_active=True).count()
    html = client.get("/catalog/", {"gpus": "", "page": 99}).content.decode()
    assert f"Page {-(-total // 10)} of {-(-total // 10)} · {total} in all" in html
