"""A quote or order read is two queries, the key and the rows: no catalog table (its names come
from the process's catalog), no encrypted storage key, no write; one row of a reseller's customer
is found by its reference, anyone else's is a 404 (the rule on the joined organisation)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.api.conftest import key_client
from tests.factories import make_order, make_quote

CATALOG_TABLES = ("catalog_serversku", "catalog_gpumodel", "catalog_nvmeoption", "catalog_networkoption",
                  "catalog_storageprovider", "catalog_stackoption")


@pytest.fixture
def reseller_api(catalog, people):
    client = key_client(people.reseller)
    client.get("/api/v1/orders")  # the key's last_used_at is written once, here
    return client


def _queries(call) -> list[str]:
    call()  # the catalog names, once per process
    with CaptureQueriesContext(connection) as queries:
        response = call()
    assert response.status_code == 200, response.content
    return [q["sql"] for q in queries.captured_queries]


@pytest.mark.parametrize("path", ["/api/v1/quotes/{quote}", "/api/v1/quotes", "/api/v1/orders/{order}",
                                  "/api/v1/orders"])
def test_a_read_is_the_key_and_the_rows(reseller_api, people, path):
    order = make_order(people.client_org)
    url = path.format(quote=order.quote.reference, order=order.reference)
    sql = _queries(lambda: reseller_api.get(url))
    assert len(sql) == 2, sql
    assert not [q for q in sql if any(t in q for t in CATALOG_TABLES)], sql
    assert not [q for q in sql if "storage_secret_key" in q or "storage_access_key_id" in q], sql
    assert not [q for q in sql if q.lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE"))], sql


def test_a_customers_row_reads_as_the_reseller_sees_it_and_an_outsiders_is_a_404(reseller_api, people):
    mine = make_quote(people.client_org)
    theirs = make_quote(people.acme)
    body = reseller_api.get(f"/api/v1/quotes/{mine.reference}").json()
    assert body["organisation"] == people.client_org.slug and body["sku"] == mine.sku.slug
    assert body["sku_name"] == mine.sku.name and body["is_valid"] is True
    assert reseller_api.get(f"/api/v1/quotes/{theirs.reference}").status_code == 404
    customer = key_client(people.client_org)
    reseller_own = make_quote(people.reseller)
    assert customer.get(f"/api/v1/quotes/{reseller_own.reference}").status_code == 404


def test_output_fields_are_built_once_per_class_not_per_answer(reseller_api, people, monkeypatch):
    """FieldsBoundOnce relies on DRF reading `_readable_fields` in to_representation; were that to
    change, every answer would build its fields again and this would fail."""
    from portal.api.v1.serializers_orders import OrderOutputSerializer

    built = []
    get_fields = OrderOutputSerializer.get_fields
    monkeypatch.setattr(OrderOutputSerializer, "get_fields",
                        lambda self: built.append(self) or get_fields(self))
    monkeypatch.delattr(OrderOutputSerializer, "_readable_fields_bound", raising=False)
    make_order(people.client_org)
    make_order(people.client_org)
    for _ in range(3):
        assert [o["organisation"] for o in reseller_api.get("/api/v1/orders").json()["results"]] == [
            people.client_org.slug] * 2
    assert len(built) == 1
