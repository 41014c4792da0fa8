"""No SSRF through webhooks: receivers on private, loopback, link-local (cloud metadata),
reserved or otherwise non-public addresses are refused when an endpoint is saved, and again at
delivery on the address the connection would use (a name that resolves elsewhere later, a row
written around the API). Loopback only where OUTBOUND_ALLOWED_NETWORKS allows it (the rule is
portal.core.addresses, tested in tests/core/test_addresses.py)."""

import pytest
from django.core.exceptions import ValidationError

from portal.webhooks.delivery import delivery_attempt
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint
from portal.webhooks.publish import endpoint_test_send
from portal.webhooks.services import endpoint_create, endpoint_update
from tests.conftest import LOOPBACK_NETWORKS

pytestmark = pytest.mark.django_db

REFUSED = [
    "https://10.0.0.5/in", "https://172.16.3.4/in", "https://192.168.1.1/in",
    "https://169.254.169.254/latest/meta-data/", "https://[fe80::1]/in", "https://[fd00::1]/in",
    "https://100.64.0.1/in", "https://0.0.0.0/in", "https://224.0.0.1/in", "https://240.0.0.1/in",
    "https://[::ffff:10.0.0.5]/in", "https://[::ffff:169.254.169.254]/in",
]


@pytest.mark.parametrize("url", REFUSED)
def test_non_public_addresses_are_refused_at_creation(people, settings, url):
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS  # even where loopback is allowed
    with pytest.raises(ValidationError) as caught:
        endpoint_create(organisation=people.reseller, url=url)
    assert "public addresses only" in str(caught.value)
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize("url", ["https://127.0.0.1/in", "https://[::1]/in", "https://localhost/in",
                                 "http://localhost:8080/in", "https://[::ffff:127.0.0.1]/in"])
def test_loopback_is_refused_unless_allowed(people, settings, url):
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    with pytest.raises(ValidationError):
        endpoint_create(organisation=people.reseller, url=url)
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    assert endpoint_create(organisation=people.reseller, url=url)[0].url == url


def test_an_update_is_checked_the_same_way(people, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    endpoint, _ = endpoint_create(organisation=people.reseller, url="https://hooks.example.com/in")
    with pytest.raises(ValidationError):
        endpoint_update(endpoint=endpoint, url="https://169.254.169.254/")
    endpoint.refresh_from_db()
    assert endpoint.url == "https://hooks.example.com/in"


def test_a_public_address_is_accepted(people, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    assert endpoint_create(organisation=people.reseller, url="https://203.0.114.9/in")[0].pk


def test_the_delivery_checks_the_address_it_connects_to(people, settings, httpserver):
    """Saved while loopback was allowed (a name that resolved elsewhere then): at delivery time
    the connection to loopback is refused, nothing reaches the receiver, the log says why."""
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    url = httpserver.url_for("/hook").replace("127.0.0.1", "localhost")
    endpoint, _ = endpoint_create(organisation=people.reseller, url=url)
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    delivery = endpoint_test_send(endpoint=endpoint)
    assert delivery_attempt(delivery_id=delivery.pk) is not None  # retried later, like any failure
    [attempt] = delivery.log.all()
    assert attempt.status_code is None and "refused to connect to localhost" in attempt.error
    assert "loopback" in attempt.error and httpserver.log == []
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=attempt.at)
    assert delivery_attempt(delivery_id=delivery.pk) is None and len(httpserver.log) == 1


def test_a_row_written_around_the_checks_is_refused_at_delivery(people, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    endpoint = WebhookEndpoint.objects.create(organisation=people.reseller, secret="whsec_x",
                                              url="http://169.254.169.254/latest/meta-data/")
    delivery = endpoint_test_send(endpoint=endpoint)
    delivery_attempt(delivery_id=delivery.pk)
    assert "link-local" in delivery.log.get().error
