"""A quote or order read is two queries, the key and the rows: no catalog table (its names come
from the process's catalog), no encrypted storage key, no write; one row of a reseller's customer
is found by its reference, anyone else's is a 404 (a key's rows through its scope's compiled
query, a person's with the rule on the joined organisation); an unchanged order's answer is kept."""

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
    """RowSerializer relies on DRF reading `_readable_fields` (the schema) and on its own
    to_representation; were either to build the fields again per answer, this would fail."""
    from portal.api.v1.serializers_orders import OrderOutputSerializer

    built = []
    get_fields = OrderOutputSerializer.get_fields
    monkeypatch.setattr(OrderOutputSerializer, "get_fields",
                        lambda self: built.append(self) or get_fields(self))
    monkeypatch.delattr(OrderOutputSerializer, "_row_plan_built", raising=False)
    make_order(people.client_org)
    make_order(people.client_org)
    for _ in range(3):
        assert [o["organisation"] for o in reseller_api.get("/api/v1/orders").json()["results"]] == [
            people.client_org.slug] * 2
    assert len(built) == 1


@pytest.mark.parametrize("kind", ["quote", "order"])
def test_a_row_reads_as_drfs_own_serialising_reads_it(catalog, people, kind):
    """Reading a plain field by key gives what DRF's generic attribute walk gives, field by field."""
    from rest_framework.serializers import ModelSerializer

    from portal.api.v1.rows import order_row, quote_row
    from portal.api.v1.serializers import QuoteOutputSerializer
    from portal.api.v1.serializers_orders import OrderOutputSerializer

    order = make_order(people.client_org)
    if kind == "quote":
        serializer, row = QuoteOutputSerializer, quote_row(people.rita, order.quote.reference)
    else:
        serializer, row = OrderOutputSerializer, order_row(people.rita, order.reference)
    ours = serializer(row).data
    assert ours == ModelSerializer.to_representation(serializer(), row)
    assert ours["created_at"].endswith("Z") and ours["sku"] == order.sku.slug


def test_times_are_utc_whatever_zone_is_active(reseller_api, people):
    import datetime

    from django.utils import timezone

    order = make_order(people.client_org)
    with timezone.override("Asia/Tokyo"):
        body = reseller_api.get(f"/api/v1/orders/{order.reference}").json()
    assert body["created_at"] == order.created_at.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def test_a_keys_list_query_is_built_once_per_scope_and_sees_customers_added_since(reseller_api, people,
                                                                                monkeypatch):
    """The kept, filtered query holds the tenancy rule as a subquery, not as the ids it found."""
    from portal.accounts.models import Organisation
    from portal.api.v1 import rows

    monkeypatch.setattr(rows, "_scoped", {})
    built = []
    organisations_for = rows.organisations_for
    monkeypatch.setattr(rows, "organisations_for", lambda user: built.append(user) or organisations_for(user))
    make_order(people.client_org)
    assert len(reseller_api.get("/api/v1/orders").json()["results"]) == 1
    newcomer = Organisation.objects.create(name="New Client", slug="new-client", parent=people.reseller)
    make_order(newcomer)
    make_order(people.acme)  # not the reseller's
    listed = [o["organisation"] for o in reseller_api.get("/api/v1/orders").json()["results"]]
    assert sorted(listed) == ["new-client", "resale-client"]
    assert len(built) == 1
    customer = [o["organisation"] for o in key_client(newcomer).get("/api/v1/orders").json()["results"]]
    assert customer == ["new-client"] and len(built) == 2


def test_an_orders_answer_is_kept_by_row_and_made_again_when_the_row_or_the_catalog_changes(
        reseller_api, people, monkeypatch):
    from portal.api.v1 import serializers as s
    from portal.api.v1.serializers_orders import OrderOutputSerializer
    from portal.catalog.models import ServerSKU
    from portal.orders.models import Order

    monkeypatch.setattr(s, "_memos", {})
    order = make_order(people.client_org)

    def listed() -> dict:
        return reseller_api.get("/api/v1/orders").json()["results"][0]

    first = listed()
    made = []
    answer = OrderOutputSerializer._answer
    monkeypatch.setattr(OrderOutputSerializer, "_answer",
                        lambda self, row: made.append(row) or answer(self, row))
    assert listed() == first and not made and len(s._memos[OrderOutputSerializer][1]) == 1
    Order.objects.filter(pk=order.pk).update(state="cancelled", plan={"model": "changed"})  # no signal
    again = listed()
    assert (again["state"], again["plan"]) == ("cancelled", {"model": "changed"}) and len(made) == 1
    sku = ServerSKU.objects.get(pk=order.sku_id)
    sku.slug = "renamed-sku"
    sku.save()  # a catalog change: its names are read again, the kept answers dropped
    assert listed()["sku"] == "renamed-sku"
    monkeypatch.setattr(OrderOutputSerializer, "memo_rows", 2)
    make_order(people.client_org, sku="renamed-sku")
    make_order(people.client_org, sku="renamed-sku")
    assert len(reseller_api.get("/api/v1/orders").json()["results"]) == 3
    assert len(s._memos[OrderOutputSerializer][1]) <= 2


def test_a_cursor_whose_position_is_not_a_time_is_a_404(reseller_api, people):
    import base64

    cursor = base64.b64encode(b"p=yesterday").decode()
    response = reseller_api.get("/api/v1/orders", {"cursor": cursor})
    assert response.status_code == 404 and "cursor" in response.json()["detail"].lower()


def test_a_keys_reads_run_compiled_queries(require_postgres, reseller_api, people, monkeypatch):
    """The shapes a reseller's reads take compile, none falls back to the ORM unnoticed (on
    PostgreSQL: SQLite's backend turns a time into text, so a cursor's page runs on the ORM there)."""
    from portal.core import compiled

    monkeypatch.setattr(compiled, "_shapes", compiled.OrderedDict())
    order = make_order(people.client_org)
    make_order(people.client_org)
    for path in ["/api/v1/orders", "/api/v1/orders?limit=1", f"/api/v1/orders/{order.reference}",
                 "/api/v1/orders?state=draft&state=cancelled&customer=resale-client", "/api/v1/quotes",
                 f"/api/v1/quotes/{order.quote.reference}", "/api/v1/catalog"]:
        assert reseller_api.get(path).status_code == 200, path
    page = reseller_api.get("/api/v1/orders?limit=1").json()
    assert reseller_api.get(page["next"]).json()["results"]
    entries = list(compiled._shapes.values())
    assert len(entries) >= 8 and all(isinstance(e, compiled._Compiled) for e in entries), entries
