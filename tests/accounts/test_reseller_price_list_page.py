"""A reseller's admin sees its price list on its organisation page (issue 29, item 12): each
server's list price, the price on its list, and the difference. Customers do not."""

from decimal import Decimal

from django.urls import reverse

from portal.catalog.models import PriceList, ServerSKU


def test_the_reseller_admin_sees_its_prices_and_markup(people, catalog, client):
    PriceList.objects.create(organisation=people.reseller, name="Partner", percent=Decimal("20"))
    sku = ServerSKU.objects.get(slug="1x-l4-24gb")
    client.force_login(people.rita)
    html = client.get(reverse("accounts:organisation", args=[people.reseller.slug])).content.decode()
    assert "Your price list" in html
    paid = (sku.price_hourly * Decimal("1.2")).quantize(Decimal("0.01"))
    assert f"${paid}/h" in html and f"+${paid - sku.price_hourly}/h" in html

    client.force_login(people.alice)
    html = client.get(reverse("accounts:organisation", args=[people.acme.slug])).content.decode()
    assert "Your price list" not in html
