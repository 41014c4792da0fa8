"""A quote or order read is two queries, the key and the rows: no catalog table (its names come
from the process's catalog), no encrypted storage key, no write; one row of a reseller's customer
is found by its reference, anyone else's is a 404; customers added since are seen at once."""

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


@pytest.mark.parametrize("kind", ["quote", "order"])
def test_a_row_reads_as_drfs_own_serialising_reads_it(catalog, people, kind):
    """A row of rows.py serialises as DRF serialises it."""
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


def test_a_resellers_key_sees_customers_added_since_its_last_read(reseller_api, people):
    from portal.accounts.models import Organisation

    make_order(people.client_org)
    assert len(reseller_api.get("/api/v1/orders").json()["results"]) == 1
    newcomer = Organisation.objects.create(name="New Client", slug="new-client", parent=people.reseller)
    make_order(newcomer)
    make_order(people.acme)  # not the reseller's
    listed = [o["organisation"] for o in reseller_api.get("/api/v1/orders").json()["results"]]
    assert sorted(listed) == ["new-client", "resale-client"]
    customer = [o["organisation"] for o in key_client(newcomer).get("/api/v1/orders").json()["results"]]
    assert customer == ["new-client"]


def test_a_cursor_whose_position_is_not_a_time_is_a_404(reseller_api, people):
    import base64

    cursor = base64.b64encode(b"p=yesterday").decode()
    response = reseller_api.get("/api/v1/orders", {"cursor": cursor})
    assert response.status_code == 404 and "cursor" in response.json()["detail"].lower()




@pytest.mark.parametrize("kind", ["quote", "order"])
def test_the_shared_answers_read_as_a_fresh_serializer_reads_each_row(catalog, people, kind):
    """RowAnswers answers every request from one serializer instance: row after row, what it
    answers is what a serializer made for that row answers (no row's value stays behind)."""
    from portal.api.v1.rows import order_row, quote_row
    from portal.api.v1.serializers import QUOTE_ANSWERS, QuoteOutputSerializer
    from portal.api.v1.serializers_orders import ORDER_ANSWERS, OrderOutputSerializer
    from portal.orders.states import OrderState

    orders = [make_order(people.client_org), make_order(people.acme, state=OrderState.SUBMITTED)]
    if kind == "quote":
        answers, serializer = QUOTE_ANSWERS, QuoteOutputSerializer
        rows = [quote_row(people.sam, o.quote.reference) for o in orders]
    else:
        answers, serializer = ORDER_ANSWERS, OrderOutputSerializer
        rows = [order_row(people.sam, o.reference) for o in orders]
    fresh = [serializer(row).data for row in rows]
    assert fresh[0] != fresh[1]
    assert answers.many(rows) == fresh
    assert [answers.one(row) for row in reversed(rows)] == fresh[::-1]


def test_the_shared_answers_keep_drfs_rules_for_a_null_a_missing_key_and_a_related_field(catalog, people):
    """A null value answers null, a row without a read-only field's key leaves the field out (as a
    fresh serializer does); a serializer with a related field, or one that reshapes its answer in
    to_representation, is refused up front."""
    from rest_framework import serializers

    from portal.api.v1.rows import order_row
    from portal.api.v1.serializers import RowAnswers
    from portal.api.v1.serializers_orders import ORDER_ANSWERS, OrderOutputSerializer

    row = order_row(people.sam, make_order(people.client_org).reference)
    row["rejection_reason"], row["tracker_id"] = None, None
    del row["currency"]
    answer = ORDER_ANSWERS.one(row)
    assert answer == OrderOutputSerializer(row).data
    assert answer["rejection_reason"] is None and answer["tracker"] is None and "currency" not in answer

    class WithRelated(serializers.Serializer):
        quote = serializers.PrimaryKeyRelatedField(read_only=True)

    class WithManyRelated(serializers.Serializer):
        quotes = serializers.PrimaryKeyRelatedField(read_only=True, many=True)

    class Reshaping(serializers.Serializer):
        reference = serializers.CharField(read_only=True)

        def to_representation(self, instance):
            return {**super().to_representation(instance), "extra": 1}

    for related in (WithRelated, WithManyRelated):
        with pytest.raises(TypeError, match="no related objects"):
            RowAnswers(related)
    with pytest.raises(TypeError, match="overrides to_representation"):
        RowAnswers(Reshaping)
