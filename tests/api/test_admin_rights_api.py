"""Who may change what an organisation holds over the API when signed in (a session): its admins.
A reseller's plain member gets a 403 issuing keys, creating or renaming customers and changing
webhook endpoints (a reseller key or endpoint sees every customer); nothing is created. The
reseller's admin and a customer's own member may; keys with the write scope may."""

import pytest
from rest_framework.test import APIClient

from portal.accounts.models import ApiKey, Organisation
from portal.accounts.services import api_key_issue
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint
from portal.webhooks.services import endpoint_create
from tests.api.conftest import assert_problem, key_client
from tests.factories import member_of, verified_login

URL = "https://hooks.example.com/in"


def _session(user) -> APIClient:
    client = APIClient()
    verified_login(client, user)
    return client


@pytest.fixture
def ron(people):
    """A plain member (not admin) of the reseller."""
    return _session(member_of(people.reseller, username="ron"))


@pytest.fixture
def endpoint(people):
    return endpoint_create(organisation=people.reseller, url=URL)[0]


def test_a_plain_reseller_member_cannot_issue_rotate_or_revoke_keys(people, ron):
    key = api_key_issue(organisation=people.reseller, name="storefront").api_key
    before = ApiKey.objects.count()
    problem = assert_problem(ron.post("/api/v1/api-keys", {"name": "mine"}, format="json"), 403)
    assert "admin of GPU Resale" in problem["detail"]
    assert_problem(ron.post(f"/api/v1/api-keys/{key.prefix}/rotate"), 403)
    assert_problem(ron.post(f"/api/v1/api-keys/{key.prefix}/revoke"), 403)
    key.refresh_from_db()
    assert key.is_active and ApiKey.objects.count() == before


def test_the_reseller_admin_and_a_customers_member_can(people):
    response = _session(people.rita).post("/api/v1/api-keys", {"name": "rita's"}, format="json")
    assert response.status_code == 201, response.content
    assert ApiKey.objects.get(prefix=response.json()["prefix"]).organisation == people.reseller
    response = _session(people.alice).post("/api/v1/api-keys", {"name": "alice's"}, format="json")
    assert response.status_code == 201, response.content


def test_a_plain_reseller_member_cannot_create_or_rename_customers(people, ron):
    assert_problem(ron.post("/api/v1/customers", {"name": "Sneaky"}, format="json"), 403)
    assert not Organisation.objects.filter(name="Sneaky").exists()
    # The customers are not theirs to see either (as on the organisation page).
    assert ron.get("/api/v1/customers").json()["results"] == []
    assert_problem(ron.patch(f"/api/v1/customers/{people.client_org.slug}", {"name": "x"},
                             format="json"), 404)
    people.client_org.refresh_from_db()
    assert people.client_org.name == "Resale Client"


def test_the_reseller_admin_creates_and_renames_customers(people):
    rita = _session(people.rita)
    assert rita.post("/api/v1/customers", {"name": "Deep Labs"}, format="json").status_code == 201
    renamed = rita.patch("/api/v1/customers/deep-labs", {"name": "Deep Labs AG"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "Deep Labs AG"


def test_a_plain_reseller_member_cannot_change_webhook_endpoints(people, ron, endpoint):
    assert_problem(ron.post("/api/v1/webhooks", {"url": URL}, format="json"), 403)
    path = f"/api/v1/webhooks/{endpoint.reference}"
    assert_problem(ron.patch(path, {"enabled": False}, format="json"), 403)
    assert_problem(ron.post(f"{path}/rotate-secret"), 403)
    assert_problem(ron.post(f"{path}/test"), 403)
    assert_problem(ron.delete(path), 403)
    assert ron.get(path).status_code == 200  # reading is fine
    endpoint.refresh_from_db()
    assert endpoint.enabled and WebhookEndpoint.objects.count() == 1
    assert not WebhookDelivery.objects.exists()


def test_the_reseller_admin_changes_webhook_endpoints(people, endpoint):
    rita = _session(people.rita)
    path = f"/api/v1/webhooks/{endpoint.reference}"
    assert rita.post(f"{path}/rotate-secret").json()["secret"].startswith("whsec_")
    assert rita.patch(path, {"description": "shop"}, format="json").status_code == 200
    assert rita.delete(path).status_code == 204


def test_a_write_key_acts_as_its_organisations_admin(people):
    client = key_client(people.reseller)
    assert client.post("/api/v1/webhooks", {"url": URL}, format="json").status_code == 201
    assert client.post("/api/v1/customers", {"name": "Via Key"}, format="json").status_code == 201
