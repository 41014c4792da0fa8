"""Quoting or ordering more nodes than are ready says how many are ready and what happens: the
order waits in the approval queue (the configurator, the quote page, placing, the order page)."""

import pytest

from portal.orders import services as order_services
from provisioning.fulfilment import orders as fulfilment
from tests.factories import H100_SKU, make_node, make_quote


def _html(client, url):
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def two_ready(catalog, sim_dir):
    return [make_node(sku=H100_SKU, state_dir=sim_dir) for _ in range(2)]


def test_the_quote_page_says_how_many_nodes_are_ready_and_that_the_order_waits(
        login, people, two_ready):
    quote = make_quote(people.acme, by=people.alice, node_count=4, network="ib-ndr-400g")
    html = _html(login(people.alice), f"/configure/quotes/{quote.reference}/")
    assert 'id="stock-note"' in html
    assert "Only 2 8× H100 SXM5 80GB (NVSwitch) nodes in stock for 4 requested" in html
    assert "waits in the approval queue until staff have the rest" in html


def test_an_out_of_stock_sku_says_so_on_the_quote_page(login, people, catalog):
    quote = make_quote(people.acme, by=people.alice)
    html = _html(login(people.alice), f"/configure/quotes/{quote.reference}/")
    assert "is out of stock (0 ready, 1 requested)" in html


def test_enough_ready_nodes_say_nothing(login, people, two_ready):
    quote = make_quote(people.acme, by=people.alice, node_count=2, network="ib-ndr-400g")
    assert 'id="stock-note"' not in _html(login(people.alice), f"/configure/quotes/{quote.reference}/")


def test_placing_and_the_pending_order_page_say_the_order_waits_for_stock(login, people, two_ready):
    quote = make_quote(people.acme, by=people.alice, node_count=3, network="ib-ndr-400g")
    client = login(people.alice)
    response = client.post(f"/orders/place/{quote.reference}/", follow=True)
    html = response.content.decode()
    assert "Only 2 8× H100 SXM5 80GB (NVSwitch) nodes in stock for 3 requested" in html
    assert html.count("waits in the approval queue") == 2  # the message and the page's note


def test_an_order_with_its_nodes_ready_has_no_stock_note(login, people, two_ready):
    quote = make_quote(people.acme, by=people.alice)
    order = fulfilment.order_submit(order=order_services.order_place(quote=quote, by=people.alice),
                                    by=people.alice)
    assert 'id="stock-note"' not in _html(login(people.alice), f"/orders/{order.reference}/")


def test_the_configurator_says_it_too(client, people, two_ready):
    html = _html(client, f"/configure/?sku={H100_SKU}&node_count=5&network=ib-ndr-400g")
    assert "Only 2 8× H100 SXM5 80GB (NVSwitch) nodes in stock for 5 requested" in html
