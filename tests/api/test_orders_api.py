"""Orders through /api/v1/: create (from a quote or inline), list, retrieve, cancel, terminate,
events; tenancy (outsider, reseller and child keys); idempotency, also under two threads."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from portal.api.models import IdempotencyKey
from portal.orders.models import Order, OrderEvent
from portal.orders.states import OrderState
from portal.quotes.models import Quote
from provisioning.fulfilment.approvals import order_reject
from tests.api.conftest import assert_problem, key_client
from tests.factories import L4_SKU, make_order, make_quote

INLINE = {"configuration": {"sku": L4_SKU}}


@pytest.fixture
def acme_api(people, catalog):
    return key_client(people.acme)


def test_it_orders_a_quote_placed_and_submitted_in_one_call(people, acme_api):
    quote = make_quote(people.acme, sku=L4_SKU, network="eth-1g", nvme="nvme-1tb-single")
    response = acme_api.post("/api/v1/orders", {"quote": quote.reference}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    order = Order.objects.get(reference=body["reference"])
    assert (body["quote"], body["organisation"]) == (quote.reference, "acme-ai")
    assert body["state"] == order.state == OrderState.PENDING_APPROVAL  # a new customer: staff approve
    assert response["Location"] == f"/api/v1/orders/{order.reference}"
    assert "failure_reason" not in body


def test_it_orders_an_inline_configuration(people, acme_api):
    response = acme_api.post("/api/v1/orders", INLINE, format="json")
    assert response.status_code == 201, response.content
    order = Order.objects.get(reference=response.json()["reference"])
    assert order.quote.organisation == people.acme and order.sku.slug == L4_SKU


def test_api_actions_are_audited_with_the_key(people, acme_api):
    reference = acme_api.post("/api/v1/orders", INLINE, format="json").json()["reference"]
    events = OrderEvent.objects.filter(order__reference=reference, transition__in=["place", "submit"])
    assert {e.api_key_id for e in events} == {acme_api.api_key.pk}
    history = acme_api.get(f"/api/v1/orders/{reference}/events").json()
    assert history[0]["by"] == f"api_key:{acme_api.api_key.prefix}"


@pytest.mark.parametrize(("body", "field"), [
    ({}, "non_field_errors"),
    ({"quote": "Q-NOPE"}, "quote"),
    ({"configuration": {"sku": "nope"}}, "configuration"),
    ({"configuration": {"sku": "8x-h100-sxm-80gb", "node_count": 2, "network": "eth-1g"}},
     "configuration"),
    ({"quote": "Q-1", "configuration": {"sku": L4_SKU}}, "non_field_errors"),
    ({"configuration": {"sku": L4_SKU}, "customer": "other-lab"}, "customer"),
])
def test_bad_input_is_a_400_by_field(acme_api, body, field):
    response = acme_api.post("/api/v1/orders", body, format="json")
    assert field in assert_problem(response, 400)["errors"]
    assert not Order.objects.exists()


def test_an_outsiders_quote_cannot_be_ordered(people, acme_api):
    theirs = make_quote(people.outsider_org)
    response = acme_api.post("/api/v1/orders", {"quote": theirs.reference}, format="json")
    assert "quote" in assert_problem(response, 400)["errors"]


def test_an_ordered_quote_is_a_409(people, acme_api):
    quote = make_quote(people.acme)
    acme_api.post("/api/v1/orders", {"quote": quote.reference}, format="json")
    response = acme_api.post("/api/v1/orders", {"quote": quote.reference}, format="json")
    assert "already ordered" in assert_problem(response, 409)["detail"]


def test_it_lists_with_cursor_pages_and_filters(people, acme_api):
    orders = [make_order(people.acme, state=state) for state in
              (OrderState.DRAFT, OrderState.ACTIVE, OrderState.ACTIVE)]
    make_order(people.outsider_org)
    Order.objects.filter(pk=orders[0].pk).update(created_at=timezone.now() - timedelta(days=3))
    first = acme_api.get("/api/v1/orders?limit=2").json()
    assert [o["reference"] for o in first["results"]] == [orders[2].reference, orders[1].reference]
    rest = acme_api.get(first["next"]).json()
    assert [o["reference"] for o in rest["results"]] == [orders[0].reference] and rest["next"] is None
    active = acme_api.get("/api/v1/orders?state=active").json()["results"]
    assert {o["reference"] for o in active} == {orders[1].reference, orders[2].reference}
    since = (timezone.now() - timedelta(days=1)).isoformat()
    recent = acme_api.get("/api/v1/orders", {"created_after": since}).json()["results"]
    assert orders[0].reference not in {o["reference"] for o in recent} and len(recent) == 2
    older = acme_api.get("/api/v1/orders", {"created_before": since}).json()["results"]
    assert [o["reference"] for o in older] == [orders[0].reference]
    both = acme_api.get("/api/v1/orders", {"created_before": since, "state": "active"}).json()
    assert both["results"] == []
    assert "created_before" in assert_problem(acme_api.get("/api/v1/orders?created_before=soon"),
                                              400)["errors"]
    assert "state" in assert_problem(acme_api.get("/api/v1/orders?state=bogus"), 400)["errors"]


def test_it_retrieves_and_an_outsider_gets_404(people, acme_api):
    order = make_order(people.acme)
    assert acme_api.get(f"/api/v1/orders/{order.reference}").json()["reference"] == order.reference
    outsider = key_client(people.outsider_org)
    for path in ("", "/events", "/server"):
        assert_problem(outsider.get(f"/api/v1/orders/{order.reference}{path}"), 404)
    for path in ("/cancel", "/terminate", "/server/reboot", "/server/redeploy"):
        assert_problem(outsider.post(f"/api/v1/orders/{order.reference}{path}", {}, format="json"), 404)
    assert Order.objects.get(pk=order.pk).state == OrderState.DRAFT


def test_it_cancels(people, acme_api):
    reference = acme_api.post("/api/v1/orders", INLINE, format="json").json()["reference"]
    response = acme_api.post(f"/api/v1/orders/{reference}/cancel", {"reason": "changed plans"},
                             format="json")
    assert response.status_code == 200 and response.json()["state"] == OrderState.CANCELLED
    assert OrderEvent.objects.get(order__reference=reference, transition="cancel").api_key_id == \
        acme_api.api_key.pk


def test_it_terminates(people, acme_api):
    order = make_order(people.acme, state=OrderState.ACTIVE)
    response = acme_api.post(f"/api/v1/orders/{order.reference}/terminate", {}, format="json")
    assert response.status_code == 202, response.content
    assert response.json()["state"] == OrderState.TERMINATED  # no node was assigned


def test_a_read_key_cannot_write(people, catalog):
    order = make_order(people.acme)
    client = key_client(people.acme, scopes=["read"])
    assert client.get(f"/api/v1/orders/{order.reference}").status_code == 200
    for path, body in (("/api/v1/orders", INLINE), (f"/api/v1/orders/{order.reference}/cancel", {})):
        assert_problem(client.post(path, body, format="json"), 403)
    assert Order.objects.count() == 1 and Order.objects.get().state == OrderState.DRAFT


def test_events_are_customer_safe(people, acme_api):
    reference = acme_api.post("/api/v1/orders", INLINE, format="json").json()["reference"]
    order = Order.objects.get(reference=reference)
    order_reject(order=order, by=people.sam, reason="No stock this month.")
    Order.objects.filter(pk=order.pk).update(failure_reason="ipmi timeout on bmc 10.0.0.7")
    OrderEvent.objects.filter(order=order).update(note="staff only: customer is a fraud risk")
    events = acme_api.get(f"/api/v1/orders/{reference}/events").json()
    assert [e["to_state"] for e in events] == ["draft", "submitted", "pending_approval", "rejected"]
    assert events[-1]["text"] == "Rejected: No stock this month." and events[-1]["by"] == "staff"
    assert events[2]["by"] == "system"
    text = str(events) + str(acme_api.get(f"/api/v1/orders/{reference}").json())
    assert "fraud" not in text and "ipmi" not in text


# --- resellers ----------------------------------------------------------------------------
def test_a_reseller_orders_for_its_customer_and_sees_it(people, catalog):
    reseller = key_client(people.reseller)
    response = reseller.post("/api/v1/orders", INLINE | {"customer": "resale-client"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["organisation"] == "resale-client"
    listed = reseller.get("/api/v1/orders?customer=resale-client").json()["results"]
    assert [o["reference"] for o in listed] == [response.json()["reference"]]


def test_a_reseller_orders_its_customers_quote(people, catalog):
    quote = make_quote(people.client_org)
    response = key_client(people.reseller).post("/api/v1/orders", {"quote": quote.reference},
                                                format="json")
    assert response.status_code == 201 and response.json()["organisation"] == "resale-client"


def test_a_childs_key_cannot_see_its_resellers_orders(people, catalog):
    own = make_order(people.reseller)
    child = key_client(people.client_org)
    assert_problem(child.get(f"/api/v1/orders/{own.reference}"), 404)
    assert child.get("/api/v1/orders").json()["results"] == []
    response = child.post("/api/v1/orders", INLINE | {"customer": "gpu-resale"}, format="json")
    assert "customer" in assert_problem(response, 400)["errors"]


def test_a_reseller_cannot_reach_another_resellers_customer(people, catalog):
    from tests.factories import OrganisationFactory

    other = OrganisationFactory(kind="reseller")
    stranger = OrganisationFactory(parent=other, slug="their-client")
    theirs = make_order(stranger)
    reseller = key_client(people.reseller)
    assert_problem(reseller.get(f"/api/v1/orders/{theirs.reference}"), 404)
    response = reseller.post("/api/v1/orders", INLINE | {"customer": "their-client"}, format="json")
    assert_problem(response, 400)


# --- idempotency --------------------------------------------------------------------------
def test_the_same_key_and_body_answer_the_first_response(acme_api):
    first = acme_api.post("/api/v1/orders", INLINE, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = acme_api.post("/api/v1/orders", INLINE, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json() and again["Location"] == first["Location"]
    assert again["Idempotent-Replayed"] == "true"
    assert Order.objects.count() == 1 and Quote.objects.count() == 1


def test_the_same_key_with_another_body_is_a_422(acme_api):
    acme_api.post("/api/v1/orders", INLINE, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    other = {"configuration": {"sku": L4_SKU, "storage_tb": 1, "storage_provider": "minio"}}
    response = acme_api.post("/api/v1/orders", other, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert_problem(response, 422, "idempotency_key_reused")
    assert Order.objects.count() == 1


def test_a_failed_call_is_not_remembered(acme_api):
    bad = acme_api.post("/api/v1/orders", {"quote": "Q-NOPE"}, format="json", HTTP_IDEMPOTENCY_KEY="k-3")
    assert bad.status_code == 400 and not IdempotencyKey.objects.exists()
    good = acme_api.post("/api/v1/orders", INLINE, format="json", HTTP_IDEMPOTENCY_KEY="k-3")
    assert good.status_code == 201


def test_a_key_older_than_a_day_is_forgotten(acme_api):
    acme_api.post("/api/v1/orders", INLINE, format="json", HTTP_IDEMPOTENCY_KEY="k-4")
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    acme_api.post("/api/v1/orders", INLINE, format="json", HTTP_IDEMPOTENCY_KEY="k-4")
    assert Order.objects.count() == 2


def test_keys_of_two_principals_do_not_meet(people, acme_api):
    acme_api.post("/api/v1/orders", INLINE, format="json", HTTP_IDEMPOTENCY_KEY="shared")
    response = key_client(people.outsider_org).post("/api/v1/orders", INLINE, format="json",
                                                     HTTP_IDEMPOTENCY_KEY="shared")
    assert response.status_code == 201 and Order.objects.count() == 2


def test_two_concurrent_identical_requests_create_one_order(people, catalog, transactional_db,
                                                             require_postgres):
    client = key_client(people.acme)
    barrier, responses = threading.Barrier(2), []

    def post():
        try:
            barrier.wait()
            responses.append(client.post("/api/v1/orders", INLINE, format="json",
                                         HTTP_IDEMPOTENCY_KEY="race-1"))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [r.status_code for r in responses] == [201, 201], [r.content for r in responses]
    assert responses[0].json() == responses[1].json()
    assert sorted(r.get("Idempotent-Replayed", "") for r in responses) == ["", "true"]
    assert Order.objects.count() == 1 and Quote.objects.count() == 1
    assert IdempotencyKey.objects.count() == 1
