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


def test_filters_narrow_the_list_by_gpu_count_memory_and_interconnect(client, catalog):
    html = client.get("/catalog/", {"gpus": "8", "memory": "141", "interconnect": "nvlink"}).content.decode()
    assert "8× NVIDIA H200 SXM 141GB" in html and "8× NVIDIA B200" in html
    assert "NVIDIA L4" not in html and "2× NVIDIA H200 NVL" not in html


def test_htmx_filter_returns_only_the_table(client, catalog):
    html = client.get("/catalog/", {"gpus": "1"}, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in html and 'id="sku-table"' in html
    assert "1× NVIDIA L4" in html and "2× NVIDIA L4" not in html


def test_bad_filter_values_are_named_and_the_full_list_stays(client, catalog):
    html = client.get("/catalog/", {"gpus": "3"}).content.decode()
    assert "Select a valid choice. 3 is not one of the available choices." in html
    assert html.count("<tr>") == 31  # header + every SKU


def test_no_match_offers_to_show_all(client, catalog):
    html = client.get("/catalog/", {"gpus": "1", "memory": "141"}).content.decode()
    assert "No server matches these filters" in html
