from portal.orders.states import OrderState
from tests.factories import make_order, make_quote


def test_dashboard_lists_live_orders_and_open_quotes_of_my_organisation_only(login, catalog, people):  # noqa: F811
    live = make_order(people.acme, state=OrderState.PROVISIONING)
    done = make_order(people.acme, state=OrderState.TERMINATED)
    open_quote = make_quote(people.acme)
    expired = make_quote(people.acme, valid_days=-1)
    theirs = make_order(people.outsider_org, state=OrderState.ACTIVE)
    their_quote = make_quote(people.outsider_org)
    html = login(people.alice).get("/").content.decode()
    assert live.reference in html and "Provisioning" in html
    assert open_quote.reference in html
    assert live.quote.reference not in html  # ordered: no longer an open quote
    for hidden in (done.reference, expired.reference, theirs.reference, their_quote.reference):
        assert hidden not in html


def test_a_new_customer_sees_the_three_steps(login, catalog, people):  # noqa: F811
    html = login(people.alice).get("/").content.decode()
    assert "1. Size" in html and "Your servers" not in html


def test_anonymous_home_goes_to_the_catalog(client, db):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/catalog/"
