"""What a reseller charges its customers: the markup over its cost (pricing.resale), the saved
prices (catalog.services.resale_prices_set: all or nothing) and which apply to a customer."""

from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from portal.accounts.models import Organisation, User
from portal.catalog.models import PriceList as PriceListRow
from portal.catalog.models import ResalePriceList
from portal.catalog.pricing import PriceList, resale
from portal.catalog.selectors import resale_markup_for
from portal.catalog.services import resale_prices_set
from portal.sizing.catalog_live import price_list_for
from tests.factories import H100_SKU, OrganisationFactory

D = Decimal


def test_the_markup_applies_to_the_cost_rounded_to_the_cent():
    cost_list = PriceList(percent=D("20"), items=(("sku:x", D("-10")),))
    markup = PriceList(percent=D("25"), items=(("sku:x", D("12.5")),))
    row = resale("sku:x", D("3.33"), cost_list=cost_list, markup=markup)
    assert row.cost == D("3.00")  # 3.33 × 0.9 = 2.997
    assert row.price == D("3.38")  # 3.00 × 1.125 = 3.375, half up
    assert (row.margin, row.margin_percent) == (D("0.38"), D("11.2"))
    other = resale("storage:y", D("10"), cost_list=None, markup=markup)
    assert (other.cost, other.price, other.margin) == (D("10.00"), D("12.50"), D("2.50"))
    assert resale("sku:x", D("0"), cost_list=None, markup=markup).margin_percent is None


def test_prices_are_saved_for_every_customer_and_one_customer_has_its_own(catalog, people):
    resale_prices_set(reseller=people.reseller, percent="25", items={f"sku:{H100_SKU}": "40"})
    assert resale_markup_for(people.client_org) == PriceList(
        percent=D("25"), items=((f"sku:{H100_SKU}", D("40")),), name=f"resale:{people.reseller.pk}:")
    resale_prices_set(reseller=people.reseller, customer=people.client_org, percent="10", items={})
    assert resale_markup_for(people.client_org).percent == D("10")
    sibling = OrganisationFactory(name="Sibling", slug="sibling", parent=people.reseller)
    assert resale_markup_for(sibling).percent == D("25")
    assert resale_markup_for(people.acme) is None  # no reseller: the ledger's prices


def test_a_reseller_that_set_nothing_sells_at_its_cost(catalog, people):
    assert resale_markup_for(people.client_org) == PriceList(name="resale")


@pytest.mark.parametrize(("percent", "items", "field", "message"), [
    ("abc", {}, "percent", "is not a number"),
    ("501", {}, "percent", "between -90 and 500"),
    ("10", {f"sku:{H100_SKU}": "-95"}, f"sku:{H100_SKU}", "between -90 and 500"),
    ("10", {f"sku:{H100_SKU}": "1.234"}, f"sku:{H100_SKU}", "two decimals"),
    ("10", {"sku:no-such-server": "5"}, "sku:no-such-server", "No SKU or storage provider"),
])
def test_bad_input_names_the_field_and_keeps_the_saved_prices(catalog, people, percent, items, field,
                                                              message):
    resale_prices_set(reseller=people.reseller, percent="25", items={f"sku:{H100_SKU}": "40"})
    with pytest.raises(ValidationError) as error:
        resale_prices_set(reseller=people.reseller, percent=percent, items=items)
    assert message in " ".join(error.value.message_dict[field])
    saved = ResalePriceList.objects.get(reseller=people.reseller)
    assert saved.percent == D("25")
    assert [(i.key, i.percent) for i in saved.items.all()] == [(f"sku:{H100_SKU}", D("40"))]


def test_only_a_reseller_sets_prices_and_only_for_its_own_customers(catalog, people):
    with pytest.raises(PermissionDenied):
        resale_prices_set(reseller=people.acme, percent="10", items={})
    other = OrganisationFactory(name="Other Resale", slug="other-resale", kind=Organisation.Kind.RESELLER)
    with pytest.raises(PermissionDenied):
        resale_prices_set(reseller=other, customer=people.client_org, percent="10", items={})
    assert not ResalePriceList.objects.exists()


def test_the_cost_is_the_resellers_price_list(catalog, people):
    """The side by side starts from what the reseller pays: its price list, as quotes apply it."""
    PriceListRow.objects.create(organisation=people.reseller, percent=D("20"))
    cost_list = price_list_for(people.reseller)
    row = resale(f"sku:{H100_SKU}", D("10.00"), cost_list=cost_list, markup=PriceList(percent=D("10")))
    assert (row.cost, row.price) == (D("12.00"), D("13.20"))


def test_staff_read_resale_prices_in_the_admin_and_cannot_change_them(catalog, people, login):
    row = resale_prices_set(reseller=people.reseller, percent="25", items={f"sku:{H100_SKU}": "40"})
    client = login(User.objects.create_superuser("root", "root@example.com", "pw"))
    assert b"GPU Resale" in client.get("/admin/catalog/resalepricelist/").content
    page = client.get(f"/admin/catalog/resalepricelist/{row.pk}/change/")
    assert page.status_code == 200 and b"40.00" in page.content
    client.post(f"/admin/catalog/resalepricelist/{row.pk}/change/", {"percent": "99"})
    row.refresh_from_db()
    assert row.percent == D("25")
