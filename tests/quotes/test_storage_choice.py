"""The per-order storage choices: retention days and the customer's own S3 bucket, in the
configurator, the API and the order placed from the quote (frozen, keys encrypted at rest)."""

import pytest
from django.db import connection
from rest_framework.test import APIClient

from portal.accounts.services import api_key_issue
from portal.orders.services import order_place
from portal.quotes.models import Quote
from tests.factories import OrganisationFactory, member_of

CUSTOM = {"storage_provider": "custom-s3", "storage_tb": "0",
          "storage_endpoint_url": "https://s3.example.net", "storage_bucket": "acme-ckpt",
          "storage_access_key_id": "AKIACUSTOMER0001", "storage_secret_key": "very-secret-value-123"}
FORM = {"sku": "1x-l4-24gb", "node_count": "1", "nvme": "nvme-2tb-single", "network": "eth-1g"}


@pytest.fixture
def alice(catalog):
    return member_of(OrganisationFactory(slug="acme"), username="alice")


def _raw(table: str, column: str, pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def test_configurator_takes_retention_and_a_custom_bucket_and_the_order_freezes_them(client, alice):
    client.force_login(alice)
    response = client.post("/configure/", FORM | CUSTOM | {"storage_retention_days": "90"})
    assert response.status_code == 302, response.content.decode()[:2000]
    quote = Quote.objects.get()
    assert (quote.storage_provider.slug, quote.storage_tb, quote.storage_retention_days) == (
        "custom-s3", 0, 90)
    assert quote.has_object_storage and quote.is_custom_storage
    assert quote.storage_secret_key == "very-secret-value-123"
    assert "very-secret-value-123" not in _raw("orders_quote", "storage_secret_key", quote.pk)
    assert "very-secret-value-123" not in response["Location"]
    order = order_place(quote=quote, by=alice)
    assert (order.storage_retention_days, order.storage_bucket, order.storage_endpoint_url) == (
        90, "acme-ckpt", "https://s3.example.net")
    assert order.storage_secret_key == "very-secret-value-123"
    assert "AKIACUSTOMER0001" not in _raw("orders_order", "storage_access_key_id", order.pk)
    quote_page = client.get(f"/configure/quotes/{quote.reference}/").content.decode()
    assert "very-secret-value-123" not in quote_page


def test_a_custom_bucket_without_keys_or_a_bad_retention_is_refused_with_reasons(client, alice):
    client.force_login(alice)
    response = client.post("/configure/", FORM | CUSTOM | {"storage_secret_key": "",
                                                           "storage_bucket": "No_Such"})
    page = response.content.decode()
    assert response.status_code == 400
    assert "Give the name of your bucket" in page and "Give an access key id and secret" in page
    response = client.post("/configure/", FORM | {"storage_retention_days": "400"})
    assert response.status_code == 400 and "less than or equal to 365" in response.content.decode()
    assert not Quote.objects.exists()


def test_default_retention_comes_from_settings(client, alice, settings):
    settings.STORAGE_RETENTION_DAYS = 12
    client.force_login(alice)
    assert client.post("/configure/", FORM | {"storage_provider": "minio", "storage_tb": "1"}
                       ).status_code == 302
    assert Quote.objects.get().storage_retention_days == 12


def test_the_api_takes_retention_and_a_custom_bucket_and_never_returns_the_secret(alice):
    client = APIClient()
    key = api_key_issue(organisation=alice.memberships.get().organisation, name="t").plaintext
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    response = client.post("/api/v1/quotes", {
        "sku": "1x-l4-24gb", "storage_provider": "custom-s3", "storage_retention_days": 5,
        "storage_custom": {"endpoint_url": "https://s3.example.net", "bucket": "acme-ckpt",
                           "access_key_id": "AKIACUSTOMER0001", "secret_key": "api-secret-456"}},
        format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["storage_retention_days"], body["storage_bucket"]) == (5, "acme-ckpt")
    assert "api-secret-456" not in response.content.decode()
    assert Quote.objects.get().storage_secret_key == "api-secret-456"
    bad = client.post("/api/v1/quotes", {"sku": "1x-l4-24gb", "storage_provider": "custom-s3",
                                         "storage_retention_days": 0}, format="json")
    assert bad.status_code == 400 and "storage_retention_days" in bad.json()["detail"]
