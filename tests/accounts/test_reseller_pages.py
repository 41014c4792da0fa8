"""A reseller's pages: customers and the prices it charges them. Its admins use them; its plain
members get 403; anyone else (another reseller, a customer, an outsider) 404."""

import re
from decimal import Decimal

import pytest

from portal.accounts.models import Membership, Organisation
from portal.catalog.models import PriceList as PriceListRow
from portal.catalog.models import ResalePriceList
from portal.catalog.pricing import PriceList, resale
from portal.catalog.selectors import sku_list
from portal.core.units import usd
from portal.sizing.catalog_live import price_list_for
from tests.factories import H100_SKU, OrganisationFactory, member_of

D = Decimal


@pytest.fixture
def other_reseller(db):
    org = OrganisationFactory(name="Rival Resale", slug="rival-resale", kind=Organisation.Kind.RESELLER)
    admin = member_of(org, username="ralph")
    Membership.objects.filter(user=admin).update(role=Membership.Role.RESELLER_ADMIN)
    OrganisationFactory(name="Rival Client", slug="rival-client", parent=org)
    return admin


def _pages(people):
    slug = people.reseller.slug
    return [f"/orgs/{slug}/customers/", f"/orgs/{slug}/customers/{people.client_org.slug}/",
            f"/orgs/{slug}/prices/", f"/orgs/{slug}/prices/?customer={people.client_org.slug}"]


def test_the_admin_adds_and_renames_a_customer(catalog, people, login):
    client = login(people.rita)
    response = client.post(f"/orgs/{people.reseller.slug}/customers/", {"name": "Neuro Labs", "slug": ""})
    assert response.status_code == 302
    customer = Organisation.objects.get(slug="neuro-labs")
    assert (customer.parent, customer.kind) == (people.reseller, "customer")
    html = client.get(f"/orgs/{people.reseller.slug}/customers/").content.decode()
    assert "Neuro Labs" in html and "Resale Client" in html
    client.post(f"/orgs/{people.reseller.slug}/customers/neuro-labs/", {"name": "Neuro Labs GmbH"})
    customer.refresh_from_db()
    assert customer.name == "Neuro Labs GmbH"


def test_a_taken_slug_or_an_empty_name_is_refused_with_the_input_kept(catalog, people, login):
    client = login(people.rita)
    response = client.post(f"/orgs/{people.reseller.slug}/customers/",
                           {"name": "Acme Copy", "slug": people.acme.slug})
    assert response.status_code == 400
    html = response.content.decode()
    assert f"The slug {people.acme.slug!r} is taken" in html.replace("&#x27;", "'")
    assert 'value="Acme Copy"' in html
    assert not Organisation.objects.filter(name="Acme Copy").exists()
    response = client.post(f"/orgs/{people.reseller.slug}/customers/{people.client_org.slug}/",
                           {"name": "  "})
    assert response.status_code == 400
    people.client_org.refresh_from_db()
    assert people.client_org.name == "Resale Client"


def test_other_tenants_get_404(catalog, people, login, other_reseller):
    for user in (other_reseller, people.alice, member_of(people.client_org, username="carol")):
        client = login(user)
        for url in _pages(people):
            assert client.get(url).status_code == 404, (user, url)
        assert client.post(f"/orgs/{people.reseller.slug}/customers/", {"name": "X"}).status_code == 404
    # the reseller's admin cannot reach the rival's customer through its own pages either
    client = login(people.rita)
    assert client.get(f"/orgs/{people.reseller.slug}/customers/rival-client/").status_code == 404
    assert client.get(f"/orgs/{people.reseller.slug}/prices/?customer=rival-client").status_code == 404
    assert client.post(f"/orgs/{people.reseller.slug}/prices/?customer=rival-client",
                       {"percent": "5"}).status_code == 404
    assert not Organisation.objects.filter(name="X").exists()


def test_a_plain_member_of_the_reseller_gets_403(catalog, people, login):
    client = login(member_of(people.reseller, username="max"))
    for url in _pages(people):
        assert client.get(url).status_code == 403, url
    assert client.post(f"/orgs/{people.reseller.slug}/prices/", {"percent": "50"}).status_code == 403
    assert not ResalePriceList.objects.exists()


def _cells(html: str, name: str) -> list[str]:
    cell = f'<td class="cell-title" data-label="Server">{re.escape(name)}</td>'
    row = re.search(rf"<tr>\s*{cell}(.*?)</tr>", html, re.S)
    return re.findall(r"\$[\d,]+\.\d\d", row.group(1))


def test_cost_price_and_margin_side_by_side_equal_the_pricing_module(catalog, people, login):
    PriceListRow.objects.create(organisation=people.reseller, percent=D("20"))
    client = login(people.rita)
    response = client.post(f"/orgs/{people.reseller.slug}/prices/",
                           {"percent": "25", f"sku:{H100_SKU}": "40"})
    assert response.status_code == 302
    html = client.get(f"/orgs/{people.reseller.slug}/prices/").content.decode()
    markup = PriceList(percent=D("25"), items=((f"sku:{H100_SKU}", D("40")),))
    for sku in sku_list():
        key = f"sku:{sku.slug}"
        hourly, monthly = (resale(key, amount, cost_list=price_list_for(people.reseller), markup=markup)
                           for amount in (sku.price_hourly, sku.price_monthly))
        assert _cells(html, sku.name) == [usd(hourly.cost), usd(monthly.cost), usd(hourly.price),
                                          usd(monthly.price), usd(hourly.margin), usd(monthly.margin)]
    h100 = next(s for s in sku_list() if s.slug == H100_SKU)
    assert resale(f"sku:{H100_SKU}", h100.price_hourly, cost_list=price_list_for(people.reseller),
                  markup=markup).price == (h100.price_hourly * D("1.2") * D("1.4")).quantize(D("0.01"))


def test_bad_markups_are_refused_and_nothing_is_lost(catalog, people, login):
    client = login(people.rita)
    client.post(f"/orgs/{people.reseller.slug}/prices/", {"percent": "25", f"sku:{H100_SKU}": "40"})
    response = client.post(f"/orgs/{people.reseller.slug}/prices/",
                           {"percent": "30", f"sku:{H100_SKU}": "900"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "Nothing was saved" in html and "between -90 and 500 %" in html
    assert 'value="900"' in html and 'value="30"' in html
    saved = ResalePriceList.objects.get(reseller=people.reseller, customer=None)
    assert saved.percent == D("25")
    assert [(i.key, i.percent) for i in saved.items.all()] == [(f"sku:{H100_SKU}", D("40"))]


def test_a_customer_gets_its_own_prices_and_can_drop_them(catalog, people, login):
    client = login(people.rita)
    client.post(f"/orgs/{people.reseller.slug}/prices/", {"percent": "25"})
    url = f"/orgs/{people.reseller.slug}/prices/?customer={people.client_org.slug}"
    assert "pays your prices for every customer" in client.get(url).content.decode()
    assert client.post(url, {"percent": "10"}).status_code == 302
    assert ResalePriceList.objects.get(customer=people.client_org).percent == D("10")
    client.post(f"/orgs/{people.reseller.slug}/prices/reset/?customer={people.client_org.slug}")
    assert not ResalePriceList.objects.filter(customer=people.client_org).exists()
    assert ResalePriceList.objects.get(reseller=people.reseller, customer=None).percent == D("25")
