"""Reseller price lists: a markup or discount per SKU or option (else one for everything), applied
by the one price function. The reseller and the customers it sells to pay its list, in the API's
catalog, the configurator page, the wizard's plans, the API's recommendations and every quote;
a quote keeps the price it was made with; anyone else pays the list prices."""

import re
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from portal.catalog.models import NetworkOption, NvmeOption, PriceList, PriceListItem, ServerSKU
from portal.catalog.pricing import Priced, server_price
from portal.catalog.pricing import PriceList as PurePriceList
from portal.quotes.models import Quote
from tests.api.conftest import key_client

SKU = "1x-l4-24gb"
CONFIG = {"sku": SKU, "nvme": "nvme-1tb-single", "network": "eth-1g", "storage_provider": "minio",
          "storage_tb": 3}


# --- the pure function ----------------------------------------------------------------------
def test_each_unit_price_is_adjusted_to_the_cent_before_it_is_multiplied():
    price_list = PurePriceList(percent=Decimal("-10"), items=(("sku:gpu", Decimal("12.5")),))
    price = server_price(nodes=3, server=Priced("GPU", Decimal("1000.00"), Decimal("1.33"), key="sku:gpu"),
                         per_node=(Priced("NVMe", Decimal("33.33"), key="nvme:x"),),
                         shared=(Priced("Bucket", Decimal("20.00"), quantity=7, key="storage:s"),),
                         price_list=price_list)
    server, nvme, bucket = price.lines
    assert (server.hourly, server.monthly) == (Decimal("4.50"), Decimal("3375.00"))  # 1.50 × 3, 1125 × 3
    assert nvme.monthly == Decimal("90.00")  # 30.00 (33.33 − 10 %, to the cent) × 3
    assert bucket.monthly == Decimal("126.00")  # 18.00 × 7
    assert price.hourly == sum(line.hourly for line in price.lines)
    untouched = server_price(nodes=3, server=Priced("GPU", Decimal("1000"), Decimal("1.33"), key="sku:gpu"))
    assert untouched.lines[0].hourly == Decimal("3.99")


@pytest.mark.parametrize("percent", [Decimal("-95"), Decimal("501")])
def test_a_price_list_out_of_bounds_is_refused(percent):
    with pytest.raises(ValueError, match="between -90 and 500 percent"):
        PurePriceList(percent=percent)


# --- the reseller's prices everywhere -------------------------------------------------------
@pytest.fixture
def price_list(catalog, people):
    """GPU Resale pays 10 % less on everything, but 25 % more on the L4 server."""
    prices = PriceList.objects.create(organisation=people.reseller, name="Partner", percent=Decimal("-10"))
    PriceListItem.objects.create(price_list=prices, sku=ServerSKU.objects.get(slug=SKU),
                                 percent=Decimal("25"))
    return prices


def _listed(sku_slug: str) -> ServerSKU:
    return ServerSKU.objects.get(slug=sku_slug)


def _money(value) -> Decimal:
    return Decimal(value).quantize(Decimal("0.01"))


def test_the_catalog_shows_prices_as_the_keys_organisation_pays_them(people, price_list):
    sku, nvme = _listed(SKU), NvmeOption.objects.get(slug="nvme-2tb-single")
    expected = {"price_hourly": str(_money(sku.price_hourly * Decimal("1.25"))),
                "price_monthly": str(_money(sku.price_monthly * Decimal("1.25")))}
    for org in (people.reseller, people.client_org):  # the reseller and its customer
        body = key_client(org).get("/api/v1/catalog").json()
        row = next(s for s in body["skus"] if s["slug"] == SKU)
        assert {k: row[k] for k in expected} == expected
        nvme_row = next(o for o in body["nvme"] if o["slug"] == nvme.slug)
        assert nvme_row["price_monthly"] == str(_money(nvme.price_monthly * Decimal("0.9")))
    outsider = key_client(people.acme).get("/api/v1/catalog").json()
    row = next(s for s in outsider["skus"] if s["slug"] == SKU)
    assert row["price_hourly"] == str(sku.price_hourly)


def test_configurator_quote_and_api_agree_for_a_reseller(people, price_list, login):
    api = key_client(people.reseller)
    quote = api.post("/api/v1/quotes", CONFIG | {"customer": people.client_org.slug}, format="json").json()
    page = login(people.rita).get("/configure/price/", CONFIG | {"organisation": people.client_org.slug})
    html = page.content.decode()
    shown = re.search(r'id="price-hourly">\$([\d,.]+)<', html).group(1).replace(",", "")
    shown_month = re.search(r'id="price-monthly">\$([\d,.]+)<', html).group(1).replace(",", "")
    assert (shown, shown_month) == (quote["price_hourly"], quote["price_monthly"])
    list_price = key_client(people.acme).post("/api/v1/quotes", CONFIG, format="json").json()
    assert Decimal(quote["price_hourly"]) > Decimal(list_price["price_hourly"])  # +25 % on the server
    sku, nvme = _listed(SKU), NvmeOption.objects.get(slug="nvme-1tb-single")
    server_line, nvme_line = quote["price_lines"][:2]
    assert Decimal(server_line["monthly"]) == _money(sku.price_monthly * Decimal("1.25"))
    assert Decimal(nvme_line["monthly"]) == _money(nvme.price_monthly * Decimal("0.9"))
    assert Decimal(quote["price_hourly"]) == sum(Decimal(line["hourly"]) for line in quote["price_lines"])


def _quote_of(api, plan: dict) -> dict:
    """A quote of the configuration a plan names."""
    config = {"sku": plan["sku"], "nvme": plan["nvme_option"], "network": plan["network"],
              "node_count": plan["nodes"]}
    if plan["storage_provider"] and plan["storage_tb"]:
        config |= {"storage_provider": plan["storage_provider"], "storage_tb": int(plan["storage_tb"])}
    response = api.post("/api/v1/quotes", config, format="json")
    assert response.status_code == 201, response.content
    return response.json()


SMALL_JOB = {"model": "gpt2-124m", "dataset_tokens": 10**8, "seq_len": 1024,
             "options": {"top_n": 1, "node_counts": [1]}}


def test_the_recommended_plan_is_priced_as_the_quote_of_its_configuration(people, price_list):
    api = key_client(people.reseller)
    plan = api.post("/api/v1/recommendations", SMALL_JOB, format="json").json()["plans"][0]
    quote = _quote_of(api, plan)
    assert Decimal(str(plan["price_hourly_usd"])) == Decimal(quote["price_hourly"]), (plan, quote)
    listed = key_client(people.acme).post("/api/v1/recommendations", SMALL_JOB, format="json").json()
    listed_plan = next(p for p in listed["plans"])
    assert Decimal(str(listed_plan["price_hourly_usd"])) == Decimal(
        _quote_of(key_client(people.acme), listed_plan)["price_hourly"])
    assert listed_plan["price_hourly_usd"] != plan["price_hourly_usd"]


def test_the_wizard_prices_a_resellers_plans_as_its_quotes(people, price_list, login):
    from portal.sizing.plan_tokens import plan_unsign
    from tests.sizing.test_views_wizard import _first_token, inputs

    page = login(people.rita).post("/sizing/", inputs(go="results", preset="gpt2-124m", seq_len=1024,
                                                      max_nodes=1)).content.decode()
    plan = plan_unsign(_first_token(page))
    quote = _quote_of(key_client(people.reseller), plan)
    assert Decimal(str(plan["price_hourly_usd"])) == Decimal(quote["price_hourly"])


def test_a_quote_keeps_its_price_when_the_list_changes(people, price_list):
    api = key_client(people.reseller)
    before = api.post("/api/v1/quotes", CONFIG, format="json").json()
    price_list.percent = Decimal("-50")
    price_list.save()
    PriceListItem.objects.filter(price_list=price_list).update(percent=Decimal("0"))
    assert Quote.objects.get(reference=before["reference"]).price_hourly == Decimal(before["price_hourly"])
    assert api.get(f"/api/v1/quotes/{before['reference']}").json()["price_hourly"] == before["price_hourly"]
    after = api.post("/api/v1/quotes", CONFIG, format="json").json()
    assert Decimal(after["price_hourly"]) < Decimal(before["price_hourly"])


def test_a_list_names_one_target_per_item_and_belongs_to_a_reseller(people, price_list):
    item = PriceListItem(price_list=price_list, percent=Decimal("5"))
    with pytest.raises(ValidationError):
        item.clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        PriceListItem.objects.create(price_list=price_list, percent=Decimal("5"),
                                     nvme=NvmeOption.objects.first(), network=NetworkOption.objects.first())
    with pytest.raises(ValidationError):
        PriceList(organisation=people.acme).clean()


def test_staff_manage_price_lists_in_the_admin(people, price_list, login):
    from portal.accounts.models import User

    admin = User.objects.create_superuser("root", "root@example.com", "pw")
    client = login(admin)
    assert client.get("/admin/catalog/pricelist/").status_code == 200
    page = client.get(f"/admin/catalog/pricelist/{price_list.pk}/change/")
    assert page.status_code == 200 and b"Markups and discounts" in page.content
