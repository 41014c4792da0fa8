"""The catalog is kept per process: a warm GET /api/v1/catalog or POST /api/v1/estimates reads no
catalog table and writes nothing; a change made here is seen at once, one made by another
process once the version counter moved (checked every CATALOG_CACHE_CHECK_S)."""

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.catalog.cache import catalog_version
from portal.catalog.models import ServerSKU
from tests.api.conftest import key_client

SKU = "1x-l4-24gb"
CATALOG_TABLES = ("catalog_gpumodel", "catalog_nvmeoption", "catalog_networkoption",
                  "catalog_storageprovider", "catalog_stackoption", "catalog_pricelist")


@pytest.fixture
def api(catalog, people):
    client = key_client(people.acme)
    client.get("/api/v1/catalog")  # the key's last_used_at is written once, here
    return client


def _price(client) -> str:
    return next(s for s in client.get("/api/v1/catalog").json()["skus"] if s["slug"] == SKU)["price_hourly"]


def _queries(call) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        response = call()
    assert response.status_code == 200, response.content
    return [q["sql"] for q in queries.captured_queries]


def test_a_warm_catalog_request_reads_no_catalog_table_and_writes_nothing(api):
    sql = _queries(lambda: api.get("/api/v1/catalog"))
    assert not [q for q in sql if any(t in q for t in CATALOG_TABLES)], sql
    assert not [q for q in sql if q.lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE"))], sql
    assert len(sql) <= 3, sql  # the key, the stock count (and the version, every few seconds)


def test_a_warm_estimate_reads_no_catalog_table(api):
    body = {"model": "llama-3.1-8b", "sku": "8x-h100-sxm-80gb", "parallel": {"dp": 8}}
    _queries(lambda: api.post("/api/v1/estimates", body, format="json"))
    sql = _queries(lambda: api.post("/api/v1/estimates", body, format="json"))
    assert not [q for q in sql if "catalog_" in q], sql


def test_stock_is_read_now(api, sim_dir):
    from tests.factories import make_node

    before = next(s for s in api.get("/api/v1/catalog").json()["skus"] if s["slug"] == SKU)["stock"]
    make_node(sku=SKU, state_dir=sim_dir)
    after = next(s for s in api.get("/api/v1/catalog").json()["skus"] if s["slug"] == SKU)["stock"]
    assert after == before + 1


def test_a_change_in_this_process_is_seen_at_once(api):
    sku = ServerSKU.objects.get(slug=SKU)
    sku.price_hourly = Decimal("9.99")
    sku.save()
    assert _price(api) == "9.99"
    ServerSKU.objects.filter(slug=SKU).update(price_hourly=Decimal("8.88"))  # bulk: no signal
    assert _price(api) == "8.88"


def test_a_change_by_another_process_is_seen_once_the_version_moved(api, settings):
    settings.CATALOG_CACHE_CHECK_S = 3600
    old = _price(api)
    version = catalog_version()
    with connection.cursor() as cursor:  # what another process's commit leaves behind
        cursor.execute("UPDATE catalog_serversku SET price_hourly = 7.77 WHERE slug = %s", [SKU])
    assert _price(api) == old  # not checked again yet
    settings.CATALOG_CACHE_CHECK_S = 0
    assert _price(api) == old  # checked: the version did not move
    with connection.cursor() as cursor:
        cursor.execute("UPDATE catalog_catalogversion SET version = version + 1")
    assert _price(api) == "7.77" and catalog_version() == version + 1


def test_stock_of_a_sku_another_process_added_is_counted(api, settings, sim_dir):
    """The SKU names come from the cached catalog: a SKU added since (another process's commit,
    seen here only when the version is next checked) is looked up again, not counted as none."""
    from portal.catalog.cache import catalog_names, sku_stock
    from tests.factories import make_node

    settings.CATALOG_CACHE_CHECK_S = 3600
    catalog_names()  # cached before the SKU exists
    source = ServerSKU.objects.get(slug=SKU)
    ServerSKU.objects.bulk_create([ServerSKU(  # bulk: no signal, as if another process made it
        slug="1x-l4-24gb-new", name="1× L4 (new)", gpu=source.gpu, gpu_count=1,
        interconnect=source.interconnect, cpu_cores=source.cpu_cores, ram_gb=source.ram_gb,
        price_hourly=source.price_hourly, price_monthly=source.price_monthly)])
    make_node(sku="1x-l4-24gb-new", state_dir=sim_dir)
    make_node(sku="1x-l4-24gb-new", state_dir=sim_dir)
    assert sku_stock()["1x-l4-24gb-new"] == 2
