"""Every URL a customer or reseller gives that the portal or its workers would connect to goes
through one rule (portal.core.addresses), refused before anything is stored: the custom S3
endpoint in the configurator, POST /api/v1/quotes and POST /api/v1/orders, and webhook
endpoints. A quote stored before the rule cannot be ordered."""

import pytest
from rest_framework.test import APIClient

from portal.core.states import DomainError
from portal.orders.models import Order
from portal.orders.services import order_place
from portal.quotes.models import Quote
from portal.webhooks.models import WebhookEndpoint
from tests.api.conftest import assert_problem, key_client
from tests.factories import L4_SKU, make_quote
from tests.security.outbound import HOSTILE_URLS

FORM = {"sku": L4_SKU, "node_count": "1", "nvme": "nvme-2tb-single", "network": "eth-1g",
        "storage_provider": "custom-s3", "storage_tb": "0", "storage_bucket": "probe-bucket",
        "storage_access_key_id": "AKIACUSTOMER0001", "storage_secret_key": "customer-secret-1"}
CUSTOM = {"bucket": "probe-bucket", "access_key_id": "AKIACUSTOMER0001",
          "secret_key": "customer-secret-1"}


@pytest.fixture(autouse=True)
def nothing_allowed(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = []


@pytest.fixture
def api(catalog, people) -> APIClient:
    return key_client(people.reseller)


def _quote_body(url: str) -> dict:
    return {"sku": L4_SKU, "storage_provider": "custom-s3", "storage_custom": CUSTOM | {"endpoint_url": url}}


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_the_configurator_refuses_the_endpoint_and_stores_nothing(client, catalog, people, url):
    client.force_login(people.alice)
    response = client.post("/configure/", FORM | {"storage_endpoint_url": url})
    assert response.status_code == 400
    page = response.content.decode()
    assert "Your S3 endpoint: " in page or "Enter a valid URL." in page
    assert not Quote.objects.exists()


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_post_quotes_refuses_the_endpoint_naming_the_field(api, url):
    problem = assert_problem(api.post("/api/v1/quotes", _quote_body(url), format="json"), 400)
    assert problem["errors"]["storage_custom"]["endpoint_url"], problem
    assert "storage_custom.endpoint_url" in problem["detail"]
    assert not Quote.objects.exists()


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_post_orders_refuses_the_endpoint_and_stores_nothing(api, url):
    response = api.post("/api/v1/orders", {"configuration": _quote_body(url)}, format="json")
    problem = assert_problem(response, 400)
    errors = problem["errors"].get("configuration", problem["errors"])
    assert errors["storage_custom"]["endpoint_url"], problem
    assert not Quote.objects.exists() and not Order.objects.exists()


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_webhook_endpoints_refuse_them_too(api, url):
    assert_problem(api.post("/api/v1/webhooks", {"url": url}, format="json"), 400)
    assert not WebhookEndpoint.objects.exists()


def test_the_message_says_why(api):
    problem = assert_problem(api.post("/api/v1/quotes", _quote_body("http://169.254.169.254/"),
                                      format="json"), 400)
    assert problem["errors"]["storage_custom"]["endpoint_url"] == [
        "Your S3 endpoint: The portal connects to public addresses only: 169.254.169.254 is a "
        "link-local address (e.g. a cloud metadata service)."]


def test_an_allow_listed_on_premises_endpoint_is_accepted(api, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["10.20.0.0/16"]
    response = api.post("/api/v1/quotes", _quote_body("http://10.20.0.9:9000"), format="json")
    assert response.status_code == 201, response.content
    assert_problem(api.post("/api/v1/quotes", _quote_body("http://10.0.0.5:9000"), format="json"), 400)


def test_a_quote_stored_before_the_rule_cannot_be_ordered(catalog, people):
    quote = make_quote(people.acme, sku=L4_SKU, network="eth-1g", storage="custom-s3")
    Quote.objects.filter(pk=quote.pk).update(storage_endpoint_url="http://127.0.0.1:6379")
    quote.refresh_from_db()
    with pytest.raises(DomainError, match="public addresses only"):
        order_place(quote=quote, by=people.alice)
    assert not Order.objects.exists()
