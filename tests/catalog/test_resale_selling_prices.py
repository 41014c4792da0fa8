"""A reseller's customer's own people and keys read the reseller's selling prices everywhere a
price is shown (catalog, configurator, quotes, the API's catalog, quotes and orders), marked up
at read time from what the reseller pays, as its usage is; the reseller reads its cost (and,
where it quotes for the customer, the customer's price beside it); the reseller's other
customers without resale prices and everyone else read what they pay; nothing frozen changes."""

import re
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.catalog.models import PriceList, ServerSKU
from portal.catalog.services import resale_prices_set
from portal.core.units import usd
from portal.orders.models import Order
from portal.orders.states import OrderState
from portal.quotes.models import Quote
from tests.api.conftest import key_client
from tests.factories import L4_SKU, OrganisationFactory, make_order, member_of, verified_login

D = Decimal
CONFIG = f"sku={L4_SKU}&node_count=1&nvme=nvme-1tb-single&network=eth-1g&storage_tb=0"


@pytest.fixture
def login(db):
    """Each person signed in on a client of their own."""
    return lambda user: verified_login(Client(), user)


def up20(amount) -> Decimal:
    return (D(amount) * D("1.2")).quantize(D("0.01"), rounding=ROUND_HALF_UP)


@pytest.fixture
def resale(catalog, people):
    """GPU Resale sells to Resale Client at 20 % over its cost; its other customer has no resale
    prices (and the reseller no prices for every customer)."""
    resale_prices_set(reseller=people.reseller, customer=people.client_org, percent="20", items={})
    other = OrganisationFactory(name="Other Client", slug="other-client", parent=people.reseller)
    return {
        "carol": member_of(people.client_org, username="carol"),
        "other": other,
        "olive": member_of(other, username="olive"),
        "l4": ServerSKU.objects.get(slug=L4_SKU),
    }


def _catalog_hourly(html: str, slug: str) -> str:
    row = re.search(rf"<tr>(?:(?!</tr>).)*\?sku={re.escape(slug)}\"(?:(?!</tr>).)*</tr>", html, re.S).group(0)
    return re.search(r'data-label="Per hour" class="num">([^<]*)<', row).group(1)


def _box_hourly(html: str) -> str:
    return re.search(r'id="price-hourly">([^<]*)<', html).group(1)


def test_the_catalog_shows_the_customer_its_selling_prices_and_everyone_else_theirs(resale, people, login):
    l4 = resale["l4"]
    assert _catalog_hourly(login(resale["carol"]).get("/catalog/").content.decode(), l4.slug) == usd(
        up20(l4.price_hourly)
    )
    for viewer in (people.rita, resale["olive"], people.alice):
        html = login(viewer).get("/catalog/").content.decode()
        assert _catalog_hourly(html, l4.slug) == usd(l4.price_hourly), viewer.username


def test_the_configurator_prices_the_customer_at_its_selling_price(resale, people, login):
    cost_html = login(people.rita).get(f"/configure/?{CONFIG}").content.decode()
    cost = D(_box_hourly(cost_html).lstrip("$").replace(",", ""))
    html = login(resale["carol"]).get(f"/configure/?{CONFIG}").content.decode()
    assert _box_hourly(html) == usd(up20(cost))
    assert f"{usd(up20(resale['l4'].price_hourly))}/h" in html  # the SKU dropdown
    assert 'id="customer-price"' not in html
    other = login(resale["olive"]).get(f"/configure/?{CONFIG}").content.decode()
    assert _box_hourly(other) == usd(cost)


def test_the_reseller_quoting_for_its_customer_sees_its_cost_and_the_customers_price(resale, people, login):
    client = login(people.rita)
    own = client.get(f"/configure/?{CONFIG}&organisation={people.reseller.slug}").content.decode()
    html = client.get(f"/configure/?{CONFIG}&organisation={people.client_org.slug}").content.decode()
    cost = _box_hourly(own)
    assert _box_hourly(html) == cost and 'id="customer-price"' not in own
    assert "Resale Client pays" in html
    shown = re.search(r'id="customer-price-hourly">([^<]*)<', html).group(1)
    assert shown == usd(up20(D(cost.lstrip("$").replace(",", ""))))


def test_a_quote_freezes_the_cost_and_reads_at_the_viewers_prices(resale, people, login):
    carol = login(resale["carol"])
    response = carol.post("/configure/", dict(x.split("=") for x in CONFIG.split("&")))
    assert response.status_code == 302, response.content.decode()[:2000]
    quote = Quote.objects.get(organisation=people.client_org)
    cost_box = _box_hourly(login(people.rita).get(f"/configure/?{CONFIG}").content.decode())
    assert usd(quote.price_hourly) == cost_box  # frozen at the reseller's cost, as it is billed
    html = carol.get(f"/configure/quotes/{quote.reference}/").content.decode()
    assert re.search(r'<p class="price-now"><span class="stat">([^<]*)<', html).group(1) == usd(
        up20(quote.price_hourly)
    )
    assert "Resale Client pays" not in html
    rita = login(people.rita).get(f"/configure/quotes/{quote.reference}/").content.decode()
    assert re.search(r'<p class="price-now"><span class="stat">([^<]*)<', rita).group(1) == usd(
        quote.price_hourly
    )
    assert re.search(r'id="customer-price-hourly">([^<]*)<', rita).group(1) == usd(up20(quote.price_hourly))
    staff = login(people.sam).get(f"/configure/quotes/{quote.reference}/")
    assert 'id="customer-price"' not in staff.content.decode()  # staff read the cost only
    home = carol.get("/").content.decode()
    assert f"{usd(up20(quote.price_hourly))}/h" in home
    quote.refresh_from_db()
    assert usd(quote.price_hourly) == cost_box


def test_the_api_answers_the_customers_key_at_selling_prices(resale, people):
    order = make_order(
        people.client_org, state=OrderState.ACTIVE, sku=L4_SKU, nvme="nvme-1tb-single", network="eth-1g"
    )
    frozen = (order.price_hourly, order.price_monthly)
    mine = key_client(people.client_org)
    skus = {s["slug"]: s for s in mine.get("/api/v1/catalog").json()["skus"]}
    assert D(skus[L4_SKU]["price_hourly"]) == up20(resale["l4"].price_hourly)
    quote = mine.get(f"/api/v1/quotes/{order.quote.reference}").json()
    assert D(quote["price_hourly"]) == up20(order.price_hourly)
    assert D(quote["price_monthly"]) == up20(order.price_monthly)
    listed = mine.get("/api/v1/quotes").json()["results"]
    assert [D(q["price_hourly"]) for q in listed] == [up20(order.price_hourly)]
    detail = mine.get(f"/api/v1/orders/{order.reference}").json()
    assert D(detail["price_hourly"]) == up20(order.price_hourly)
    assert [D(o["price_hourly"]) for o in mine.get("/api/v1/orders").json()["results"]] == [
        up20(order.price_hourly)
    ]
    reseller = key_client(people.reseller)
    assert D(reseller.get(f"/api/v1/orders/{order.reference}").json()["price_hourly"]) == order.price_hourly
    assert (
        D(reseller.get(f"/api/v1/quotes/{order.quote.reference}").json()["price_hourly"])
        == order.price_hourly
    )
    other_skus = {s["slug"]: s for s in key_client(resale["other"]).get("/api/v1/catalog").json()["skus"]}
    plain_skus = {s["slug"]: s for s in key_client(people.acme).get("/api/v1/catalog").json()["skus"]}
    assert (
        D(other_skus[L4_SKU]["price_hourly"])
        == D(plain_skus[L4_SKU]["price_hourly"])
        == resale["l4"].price_hourly
    )
    order.refresh_from_db()
    assert (order.price_hourly, order.price_monthly) == frozen
    assert Order.objects.get(pk=order.pk).quote.price_hourly == frozen[0]


def test_the_markup_is_on_the_resellers_cost(resale, people):
    """With a price list of its own (10 % off the list), the reseller's cost is that list, and its
    customer pays 20 % over it: each unit rounded to the cent, as ``pricing.resale`` does."""
    PriceList.objects.create(organisation=people.reseller, name="Partner", percent=D("-10"))
    l4 = resale["l4"]
    cost = (l4.price_hourly * D("0.9")).quantize(D("0.01"), rounding=ROUND_HALF_UP)
    skus = {s["slug"]: s for s in key_client(people.client_org).get("/api/v1/catalog").json()["skus"]}
    assert D(skus[L4_SKU]["price_hourly"]) == up20(cost)
    skus = {s["slug"]: s for s in key_client(people.reseller).get("/api/v1/catalog").json()["skus"]}
    assert D(skus[L4_SKU]["price_hourly"]) == cost


def test_an_outsider_still_gets_a_404(resale, people, login):
    order = make_order(people.client_org, sku=L4_SKU)
    charlie = login(people.charlie)
    assert charlie.get(f"/configure/quotes/{order.quote.reference}/").status_code == 404
    outsider = key_client(people.outsider_org)
    assert outsider.get(f"/api/v1/quotes/{order.quote.reference}").status_code == 404
    assert outsider.get(f"/api/v1/orders/{order.reference}").status_code == 404


def test_the_recommendations_price_the_customers_plans_at_its_selling_prices(resale, people):
    from tests.catalog.test_price_lists import SMALL_JOB, _quote_of

    mine = key_client(people.client_org)
    plan = mine.post("/api/v1/recommendations", SMALL_JOB, format="json").json()["plans"][0]
    quote = _quote_of(mine, plan)  # read back at the customer's prices
    assert Decimal(str(plan["price_hourly_usd"])) == Decimal(quote["price_hourly"]), (plan, quote)
    resellers = key_client(people.reseller).post("/api/v1/recommendations", SMALL_JOB, format="json").json()
    cost_plan = resellers["plans"][0]
    assert (cost_plan["sku"], cost_plan["nodes"]) == (plan["sku"], plan["nodes"])
    assert Decimal(str(plan["price_hourly_usd"])) > Decimal(str(cost_plan["price_hourly_usd"]))


def test_sold_marks_up_the_nodes_and_the_bucket_on_their_totals_as_they_are_metered():
    from portal.catalog.pricing import Price, PriceLine, sold
    from portal.catalog.pricing import PriceList as Markup

    cost = Price(
        lines=(
            PriceLine("Server", D("0.05"), D("30.00")),
            PriceLine("NVMe", D("0.05"), D("30.00")),
            PriceLine("Bucket", D("0.10"), D("70.00")),
        ),
        hourly=D("0.20"),
        monthly=D("130.00"),
    )
    markup = Markup(percent=D("10"), items=(("storage:s3", D("50")),))
    price = sold(cost, markup=markup, server_key="sku:x", storage_key="storage:s3")
    assert (price.hourly, price.monthly) == (D("0.11") + D("0.15"), D("66.00") + D("105.00"))
    server, nvme, bucket = price.lines
    assert server.hourly == D("0.06")  # 0.055 to the cent, as the catalog's unit price
    assert nvme.hourly == D("0.05")  # the nodes' total is 0.11 (0.10 + 10 %): the last line takes the cent
    assert (bucket.hourly, bucket.monthly) == (D("0.15"), D("105.00"))
    assert sum(line.hourly for line in price.lines) == price.hourly
    stale = Price(lines=cost.lines, hourly=D("0.30"), monthly=D("130.00"))  # repriced since its quote
    assert sold(stale, markup=markup, server_key="sku:x", storage_key="storage:s3").lines == ()


def _nvme_label_monthly(html: str) -> str:
    select = re.search(r'<select name="nvme"[^>]*>(.*?)</select>', html, re.S).group(1)
    return re.search(r"<option[^>]*selected[^>]*>[^<]*· (\$[\d,.]+)/mo", select).group(1)


def _nvme_line_monthly(html: str) -> str:
    return re.search(r"<td[^>]*>NVMe[^<]*</td>\s*<td[^>]*>[^<]*</td>\s*<td[^>]*>([^<]*)</td>", html).group(1)


def test_a_node_option_is_labelled_at_its_servers_markup_as_its_line_is_priced(resale, people, login):
    """A per-server markup (50 % on the L4 against 20 % overall) covers the node's whole line:
    the NVMe choice is labelled at the chosen server's markup, as the price box's NVMe line and
    the node meter charge it; choosing another server relabels it (htmx, out of band)."""
    resale_prices_set(reseller=people.reseller, customer=people.client_org, percent="20",
                      items={f"sku:{L4_SKU}": "50"})
    carol = login(resale["carol"])
    html = carol.get(f"/configure/?{CONFIG}").content.decode()
    assert _nvme_label_monthly(html) == _nvme_line_monthly(html)
    nvme_cost = D(_nvme_line_monthly(login(people.rita).get(f"/configure/?{CONFIG}").content.decode())
                  .lstrip("$").replace(",", ""))
    assert _nvme_label_monthly(html) == usd((nvme_cost * D("1.5")).quantize(D("0.01")))

    other_sku = ServerSKU.objects.filter(is_active=True).exclude(slug=L4_SKU).order_by("price_hourly").first()
    update = carol.get(f"/configure/price/?{CONFIG.replace(L4_SKU, other_sku.slug)}",
                       HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-swap-oob="true"' in re.search(r'<select name="nvme"[^>]*>', update).group(0)
    assert _nvme_label_monthly(update) == usd((nvme_cost * D("1.2")).quantize(D("0.01")))
    assert _nvme_label_monthly(update) == _nvme_line_monthly(update)


def test_without_a_markup_the_price_update_leaves_the_choices_alone(resale, people, login):
    response = login(people.alice).get(f"/configure/price/?{CONFIG}", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and 'id="price-hourly"' in response.content.decode()
    assert '<select name="nvme"' not in response.content.decode()


@pytest.mark.parametrize("who", ["carol", "rita"])
def test_a_price_update_reads_the_resale_prices_once(resale, people, login, who):
    """The configurator's choices and its price box read the viewer's markups once per update
    (``resale_markups``): for the customer and for its reseller quoting for it."""
    client = login(resale["carol"] if who == "carol" else people.rita)
    url = f"/configure/price/?{CONFIG}&organisation={people.client_org.slug}"
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and 'id="price-hourly"' in response.content.decode()
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "catalog_resalepricelist"' in q["sql"]]
    assert len(reads) == 1, reads


def test_a_price_update_for_a_server_that_does_not_exist_says_so(resale, people, login):
    """A customer with resale prices and an unknown server in the query: the update names the
    field, prices nothing and still relabels the choices (at the overall markup)."""
    response = login(resale["carol"]).get(f"/configure/price/?{CONFIG.replace(L4_SKU, 'no-such-server')}",
                                          HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Select a valid choice" in re.search(r'id="rules-sku"[^>]*>(.*?)</div>', html, re.S).group(1)
    assert 'id="price-hourly"' not in html
    assert '<select name="nvme"' in html
