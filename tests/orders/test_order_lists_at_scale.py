"""A person's order list and home page: the same queries at any size, keyset pages that walk
every order once (older and back newer), and the tenancy filter as exact organisation ids."""

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.accounts.selectors import organisation_ids_for, tenant_filter
from portal.orders.models import Order
from portal.orders.states import OrderState
from tests.factories import make_order, make_quote


def _get(client, url: str) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(ctx), response.content.decode()


def _orders(org, n: int, *, state=OrderState.ACTIVE) -> list[Order]:
    made = [make_order(org, state=state) for _ in range(n)]
    base = timezone.now() - timedelta(days=1)
    for i, order in enumerate(made):  # distinct times, one pair equal (the keyset's tie-break)
        Order.objects.filter(pk=order.pk).update(created_at=base + timedelta(minutes=i - (i == 7)))
    return made


def _next_link(html: str, rel: str) -> str:
    return html.split(f'rel="{rel}"')[0].rsplit('href="', 1)[1].split('"')[0].replace("&amp;", "&")


def test_the_order_list_runs_the_same_queries_at_any_size(login, people, catalog):
    client = login(people.alice)
    _orders(people.acme, 2)
    small, _ = _get(client, "/orders/")
    _orders(people.acme, 40)
    _orders(people.outsider_org, 30)  # another tenant's: never shown, never counted
    large, html = _get(client, "/orders/")
    assert large == small
    assert html.count('data-label="Order"') == 25


def test_keyset_pages_walk_every_order_once_and_back(login, people, catalog):
    client = login(people.alice)
    made = _orders(people.acme, 57)
    newest_first = list(Order.objects.filter(organisation=people.acme)
                        .order_by("-created_at", "-pk").values_list("reference", flat=True))
    seen, pages, url = [], [], "/orders/"
    while True:
        _, html = _get(client, url)
        refs = [r for r in newest_first if f">{r}</a>" in html]
        pages.append((url, refs))
        seen += refs
        if 'rel="next"' not in html:
            break
        url = "/orders/" + _next_link(html, "next")
    assert [len(refs) for _, refs in pages] == [25, 25, 7]
    assert seen == newest_first and len(made) == 57
    # back from the last page: newer gives the middle page again
    _, html = _get(client, pages[2][0])
    _, back = _get(client, "/orders/" + _next_link(html, "prev"))
    assert [r for r in newest_first if f">{r}</a>" in back] == pages[1][1]
    assert "Newest" in back


def test_a_cursor_that_does_not_parse_is_the_first_page(login, people, catalog):
    _orders(people.acme, 3)
    _, html = _get(login(people.alice), "/orders/?older=nonsense&newer=1.x")
    assert html.count('data-label="Order"') == 3


def test_the_tenancy_filter_is_the_persons_organisations(people, catalog):
    assert organisation_ids_for(people.alice) == [people.acme.pk]
    assert set(organisation_ids_for(people.rita)) == {people.reseller.pk, people.client_org.pk}
    assert organisation_ids_for(people.sam) is None  # staff: every organisation
    sql = str(Order.objects.filter(tenant_filter(people.alice)).query)
    assert f'"organisation_id" IN ({people.acme.pk})' in sql and "SELECT" not in sql.split("WHERE")[1]


def test_the_home_page_runs_the_same_queries_at_any_size(login, people, catalog):
    client = login(people.alice)
    make_quote(people.acme, by=people.alice)
    _orders(people.acme, 1, state=OrderState.PROVISIONING)
    small, _ = _get(client, "/")
    for _ in range(12):
        make_quote(people.acme, by=people.alice)
    _orders(people.acme, 12, state=OrderState.PROVISIONING)
    large, html = _get(client, "/")
    assert large == small


def test_home_open_quotes_leave_out_those_with_a_live_order(login, people, catalog):
    open_quote = make_quote(people.acme, by=people.alice)
    ordered = make_quote(people.acme, by=people.alice)
    Order.objects.filter(pk=make_order(people.acme, state=OrderState.ACTIVE).pk).update(quote=ordered)
    expired = make_quote(people.acme, by=people.alice, valid_days=-1)
    html = login(people.alice).get("/").content.decode()
    assert open_quote.reference in html
    assert ordered.reference not in html and expired.reference not in html
