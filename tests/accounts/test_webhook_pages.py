"""An organisation's webhook endpoints on its pages: the API's services behind them, the secret
shown once, bad input refused with nothing lost, who may change them, and tenancy (404)."""

import pytest

from portal.accounts.models import Membership
from portal.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from portal.webhooks.publish import endpoint_test_send
from portal.webhooks.services import endpoint_create
from tests.factories import member_of

URL = "https://hooks.example.com/trainyard"


@pytest.fixture
def endpoint(people):
    return endpoint_create(organisation=people.reseller, url=URL, description="billing sync")[0]


def _base(people):
    return f"/orgs/{people.reseller.slug}/webhooks/"


def test_the_admin_adds_an_endpoint_and_sees_its_secret_once(people, login):
    client = login(people.rita)
    response = client.post(_base(people), {"url": URL, "event_types": ["server.ready", "invoice.issued"],
                                            "description": "ops"})
    endpoint = WebhookEndpoint.objects.get(organisation=people.reseller)
    assert response.status_code == 302 and response["Location"].endswith(f"/{endpoint.reference}/")
    html = client.get(response["Location"]).content.decode()
    assert endpoint.secret in html and "not shown again" in html
    assert endpoint.event_types == ["server.ready", "invoice.issued"]
    assert endpoint.secret not in client.get(response["Location"]).content.decode()  # once


def test_a_bad_url_is_refused_with_the_input_kept(people, login):
    client = login(people.rita)
    response = client.post(_base(people), {"url": "http://10.0.0.5/hook", "event_types": ["server.ready"],
                                            "description": "internal"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'value="internal"' in html and "http://10.0.0.5/hook" in html
    assert 'class="error"' in html
    assert not WebhookEndpoint.objects.exists()
    response = client.post(_base(people), {"url": URL, "event_types": []})
    assert response.status_code == 400 and not WebhookEndpoint.objects.exists()


def test_the_admin_changes_disables_enables_rotates_and_deletes(people, login, endpoint):
    client = login(people.rita)
    url = f"{_base(people)}{endpoint.reference}/"
    client.post(url, {"url": URL + "/v2", "event_types": ["order.state_changed"], "description": "x"})
    endpoint.refresh_from_db()
    assert (endpoint.url, endpoint.event_types) == (URL + "/v2", ["order.state_changed"])
    client.post(url + "disable/")
    endpoint.refresh_from_db()
    assert not endpoint.enabled and endpoint.disabled_reason == "Disabled by the organisation."
    client.post(url + "test/")
    assert not WebhookDelivery.objects.exists()  # a disabled endpoint is sent nothing
    client.post(url + "enable/")
    old = endpoint.secret
    response = client.post(url + "rotate/")
    endpoint.refresh_from_db()
    assert endpoint.enabled and endpoint.secret != old
    assert endpoint.secret in client.get(response["Location"]).content.decode()
    client.post(url + "delete/")  # not confirmed
    assert WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()
    client.post(url + "delete/", {"confirm": "yes"})
    assert not WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()


def test_deliveries_and_their_attempts_are_shown(people, login, endpoint):
    delivery = endpoint_test_send(endpoint=endpoint)
    WebhookAttempt.objects.create(delivery=delivery, number=1, status_code=503, duration_ms=41,
                                  error="Service Unavailable")
    html = login(people.rita).get(f"{_base(people)}{endpoint.reference}/").content.decode()
    assert "webhook.test" in html and "HTTP 503" in html and "Service Unavailable" in html


def test_a_plain_member_reads_but_changes_nothing(people, login, endpoint):
    client = login(member_of(people.reseller, username="max"))
    url = f"{_base(people)}{endpoint.reference}/"
    assert client.get(_base(people)).status_code == 200
    assert client.get(url).status_code == 200
    assert client.post(_base(people), {"url": URL, "event_types": ["server.ready"]}).status_code == 403
    for action in ("", "disable/", "rotate/", "test/", "delete/"):
        assert client.post(url + action, {"confirm": "yes", "url": URL + "/x",
                                          "event_types": ["server.ready"]}).status_code == 403, action
    endpoint.refresh_from_db()
    assert endpoint.enabled and endpoint.url == URL
    assert WebhookEndpoint.objects.count() == 1 and not WebhookDelivery.objects.exists()


def test_other_tenants_get_404(people, login, endpoint):
    carol = member_of(people.client_org, username="carol")
    Membership.objects.filter(user=carol).update(role=Membership.Role.ADMIN)
    url = f"{_base(people)}{endpoint.reference}/"
    for user in (people.alice, people.charlie, carol):
        client = login(user)
        assert client.get(_base(people)).status_code == 404
        for action in ("", "disable/", "rotate/", "test/", "delete/"):
            assert client.get(url).status_code == 404
            assert client.post(url + action, {"confirm": "yes"}).status_code == 404, (user, action)
    # the customer's own page does not list the reseller's endpoint
    mine = endpoint_create(organisation=people.client_org, url=URL)[0]
    client = login(carol)
    assert client.get(f"/orgs/{people.client_org.slug}/webhooks/{endpoint.reference}/").status_code == 404
    assert client.get(f"/orgs/{people.client_org.slug}/webhooks/{mine.reference}/").status_code == 200
    endpoint.refresh_from_db()
    assert endpoint.enabled
