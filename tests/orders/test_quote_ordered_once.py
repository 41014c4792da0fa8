"""A quote is ordered once (docs/api.md; issue 29, item 13): its order, live or terminated, uses it
up on the page and in the API (409); the dashboard no longer lists it as open. An order refused
or cancelled before anything was built leaves the quote free to order."""

import pytest
from django.urls import reverse

from portal.orders.models import Order
from portal.orders.states import OrderState
from tests.api.conftest import assert_problem, key_client
from tests.factories import L4_SKU, make_order, make_quote


def _ordered(people, state):
    order = make_order(people.acme, state=state, by=people.alice, sku=L4_SKU, network="eth-1g",
                       nvme="nvme-1tb-single")
    return order.quote, order


@pytest.mark.parametrize("state", [OrderState.ACTIVE, OrderState.TERMINATED])
def test_an_ordered_quote_is_not_open_and_cannot_be_ordered_again(state, people, catalog, client):
    quote, order = _ordered(people, state)
    client.force_login(people.alice)
    home = client.get("/").content.decode()
    assert quote.reference not in home
    page = client.get(reverse("quotes:quote", args=[quote.reference])).content.decode()
    assert "Place order" not in page and order.reference in page
    response = client.post(f"/orders/place/{quote.reference}/", follow=True)
    assert Order.objects.filter(quote=quote).count() == 1
    assert "already ordered" in response.content.decode()

    api = key_client(people.acme)
    answer = api.post("/api/v1/orders", {"quote": quote.reference}, format="json")
    assert "already ordered" in assert_problem(answer, 409)["detail"]
    assert Order.objects.filter(quote=quote).count() == 1


@pytest.mark.parametrize("state", [OrderState.CANCELLED, OrderState.REJECTED])
def test_a_quote_whose_order_never_ran_stays_open(state, people, catalog, client):
    quote, _ = _ordered(people, state)
    client.force_login(people.alice)
    assert quote.reference in client.get("/").content.decode()
    assert "Place order" in client.get(reverse("quotes:quote", args=[quote.reference])).content.decode()
    answer = key_client(people.acme).post("/api/v1/orders", {"quote": quote.reference}, format="json")
    assert answer.status_code == 201, answer.content


def test_an_unordered_quote_is_open(people, catalog, client):
    quote = make_quote(people.acme, by=people.alice)
    client.force_login(people.alice)
    assert quote.reference in client.get("/").content.decode()
