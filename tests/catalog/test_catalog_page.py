from portal.catalog.models import ServerSKU


def test_catalog_page_lists_every_active_sku_with_price(client, catalog):
    response = client.get("/catalog/")
    assert response.status_code == 200
    html = response.content.decode()
    for sku in ServerSKU.objects.select_related("gpu"):
        assert sku.gpu.name in html
        assert f"${sku.price_hourly:,.2f}" in html
    assert "InfiniBand NDR 400 Gb/s" in html
    assert "on request" in html


def test_inactive_skus_are_hidden(client, catalog):
    ServerSKU.objects.filter(gpu__slug="b200-sxm-180gb").update(is_active=False)
    assert "B200" not in client.get("/catalog/").content.decode()


def test_empty_catalog_says_how_to_fill_it(client, db):
    assert "seed_catalog" in client.get("/catalog/").content.decode()
