"""A reseller's customers: invoiced to the reseller with lines per customer, shown side by side on
the reseller's billing page, with a statement per customer; a customer sees only its own."""

import csv
import io
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from portal.billing import invoices
from portal.billing.models import Invoice
from portal.billing.selectors import month_of
from portal.billing.services import usage_sync
from portal.orders.states import OrderState
from tests.factories import make_order, member_of

MARCH = month_of(datetime(2026, 3, 1, tzinfo=UTC))


def _march(org, hours):
    order = make_order(org, state=OrderState.ACTIVE)
    usage_sync(order=order, nodes={1: "gpu-1"}, storage=False,
               at=datetime(2026, 3, 4, 10, tzinfo=UTC), cause="t")
    usage_sync(order=order, nodes={}, storage=False,
               at=datetime(2026, 3, 4, 10, tzinfo=UTC) + timedelta(hours=hours), cause="t")
    return order


def test_the_reseller_is_invoiced_with_a_line_per_customer_order(catalog, people):
    own = _march(people.reseller, 2)
    child = _march(people.client_org, 5)
    invoices.month_close(period=MARCH, now=datetime(2026, 4, 2, tzinfo=UTC))
    assert not Invoice.objects.filter(organisation=people.client_org).exists()
    invoice = Invoice.objects.get(organisation=people.reseller)
    assert [line.description for line in invoice.lines.all()] == [
        f"Order {own.reference}, node gpu-1 (2 h)",
        f"Resale Client: Order {child.reference}, node gpu-1 (5 h)"]
    assert invoice.subtotal == 2 * own.price_hourly + 5 * child.price_hourly


def test_the_reseller_sees_its_customers_and_downloads_a_statement(catalog, people, login):
    now = timezone.now().astimezone(UTC)
    order = make_order(people.client_org, state=OrderState.ACTIVE)
    usage_sync(order=order, nodes={1: "gpu-1"}, storage=False,
               at=max(now - timedelta(hours=2, minutes=5), month_of(now).start), cause="t")
    client = login(people.rita)
    html = client.get(f"/billing/{people.reseller.slug}/").content.decode()
    assert "Your customers in" in html and "Resale Client" in html
    response = client.get(f"/billing/{people.client_org.slug}/statement.csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert response["Content-Type"].startswith("text/csv")
    assert rows[1][:4] == ["Resale Client", f"{now:%Y-%m}", order.reference, "gpu-1"]
    assert rows[-1][3] == "Total" and rows[-1][5] == rows[1][5]


def test_a_customer_sees_neither_its_resellers_billing_nor_another_tenants(catalog, people, login):
    customer = member_of(people.client_org, username="carol")
    client = login(customer)
    assert client.get(f"/billing/{people.client_org.slug}/").status_code == 200
    for slug in (people.reseller.slug, people.acme.slug):
        assert client.get(f"/billing/{slug}/").status_code == 404
        assert client.get(f"/billing/{slug}/statement.csv").status_code == 404
    assert login(people.charlie).get(f"/billing/{people.client_org.slug}/statement.csv").status_code == 404
