"""The organisation's billing page and the cost card of the order and server pages; an outsider
gets 404."""

from datetime import UTC, datetime, timedelta

from django.utils import timezone

from portal.billing.selectors import month_of
from portal.billing.services import usage_sync
from portal.orders.states import OrderState
from tests.factories import H100_SKU, approved_order, drain, make_node, make_order


def _billed(org, **kwargs):
    order = make_order(org, state=OrderState.ACTIVE, **kwargs)
    now = timezone.now().astimezone(UTC)
    start = max(now - timedelta(hours=1, minutes=5), month_of(now).start)
    usage_sync(order=order, nodes={9: "gpu-0009"}, storage=False, at=start, cause="hand-over")
    return order


def test_the_billing_page_lists_the_months_orders_nodes_and_forecast(login, catalog, people):
    order = _billed(people.acme)
    other = _billed(people.outsider_org)
    response = login(people.alice).get(f"/billing/{people.acme.slug}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert order.reference in html and "gpu-0009" in html and "Running" in html
    assert "Forecast to" in html and other.reference not in html


def test_billing_redirects_to_ones_own_organisation(login, catalog, people):
    response = login(people.alice).get("/billing/")
    assert response.status_code == 302 and response["Location"] == f"/billing/{people.acme.slug}/"


def test_an_outsider_gets_404(login, catalog, people):
    _billed(people.acme)
    assert login(people.charlie).get(f"/billing/{people.acme.slug}/").status_code == 404


def test_a_bad_month_is_explained_and_a_past_one_shown(login, catalog, people):
    client = login(people.alice)
    response = client.get(f"/billing/{people.acme.slug}/", {"month": "March"})
    assert response.status_code == 400 and "YYYY-MM" in response.content.decode()
    order = make_order(people.acme, state=OrderState.ACTIVE)
    usage_sync(order=order, nodes={1: "gpu-1"}, storage=False,
               at=datetime(2025, 1, 31, 20, tzinfo=UTC), cause="t")
    usage_sync(order=order, nodes={}, storage=False, at=datetime(2025, 1, 31, 22, tzinfo=UTC), cause="t")
    html = client.get(f"/billing/{people.acme.slug}/", {"month": "2025-01"}).content.decode()
    assert "Cost of the month" in html and order.reference in html
    assert f"${2 * order.price_hourly:,}" in html


def test_the_order_and_server_pages_show_cost_so_far_and_the_wizards_estimate(login, catalog, people,
                                                                           sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, plan={"model": "Llama", "sku": H100_SKU, "nodes": 1,
                                         "train_hours": 21.4})
    client = login(people.alice)
    assert 'id="order-cost"' not in client.get(f"/orders/{order.reference}/").content.decode()
    drain(order.runs.get().pk)
    for url in (f"/orders/{order.reference}/", f"/orders/{order.reference}/server/"):
        html = client.get(url).content.decode()
        assert 'id="order-cost"' in html and "so far in" in html
        assert "the sizing wizard estimated" in html and "(23 h)" in html  # 21.4 h + 1 h set-up
