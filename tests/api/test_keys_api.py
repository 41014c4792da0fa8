"""API keys over /api/v1/: list, create (shown once), revoke, rotate with Idempotency-Key; the
key's own organisation only (outsiders and resellers' keys get 404), read keys cannot write."""

import pytest
from rest_framework.test import APIClient

from portal.accounts.models import ApiKey
from portal.accounts.services import api_key_issue
from tests.api.conftest import assert_problem, key_client


@pytest.fixture
def acme_api(people):
    return key_client(people.acme)


def test_it_creates_a_key_shown_once_that_works(acme_api):
    response = acme_api.post("/api/v1/api-keys", {"name": "storefront", "scopes": ["read"]}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["key"].startswith(f"ty_{body['prefix']}_") and body["scopes"] == ["read"]
    listed = acme_api.get("/api/v1/api-keys").json()["results"]
    assert {k["prefix"] for k in listed} == {body["prefix"], acme_api.api_key.prefix}
    assert all("key" not in k for k in listed)
    reader = APIClient()
    reader.credentials(HTTP_AUTHORIZATION=f"Api-Key {body['key']}")
    assert reader.get("/api/v1/api-keys").status_code == 200
    assert_problem(reader.post("/api/v1/api-keys", {"name": "x"}, format="json"), 403)


@pytest.mark.parametrize(("body", "field"), [
    ({}, "name"), ({"name": " "}, "name"), ({"name": "x", "scopes": ["admin"]}, "scopes"),
    ({"name": "x", "scopes": ["write"]}, "non_field_errors"),
    ({"name": "x", "scopes": []}, "non_field_errors"),
])
def test_it_validates_input_and_issues_nothing(acme_api, body, field):
    problem = assert_problem(acme_api.post("/api/v1/api-keys", body, format="json"), 400, "invalid")
    assert field in problem["errors"]
    assert ApiKey.objects.count() == 1


def test_revoking_refuses_the_key_at_once(acme_api, people):
    other = api_key_issue(organisation=people.acme, name="old")
    response = acme_api.post(f"/api/v1/api-keys/{other.api_key.prefix}/revoke")
    assert response.status_code == 200 and response.json()["active"] is False
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {other.plaintext}")
    assert_problem(client.get("/api/v1/api-keys"), 401)


def test_rotation_is_idempotent_keeps_name_and_scopes_and_revokes_the_old_key(acme_api, people):
    old = api_key_issue(organisation=people.acme, name="billing", scopes=["read"])
    path = f"/api/v1/api-keys/{old.api_key.prefix}/rotate"
    first = acme_api.post(path, HTTP_IDEMPOTENCY_KEY="rot-1")
    again = acme_api.post(path, HTTP_IDEMPOTENCY_KEY="rot-1")
    assert first.status_code == again.status_code == 201, first.content
    assert first.json() == again.json() and again["Idempotent-Replayed"] == "true"
    new = first.json()
    assert (new["name"], new["scopes"]) == ("billing", ["read"]) and new["prefix"] != old.api_key.prefix
    old.api_key.refresh_from_db()
    assert not old.api_key.is_active
    assert ApiKey.objects.filter(name="billing").count() == 2  # one rotation, not two
    assert_problem(acme_api.post(path, HTTP_IDEMPOTENCY_KEY="rot-2"), 400, "invalid")  # already revoked


def test_other_organisations_keys_are_404_even_for_the_reseller(people, acme_api):
    child_key = api_key_issue(organisation=people.client_org, name="child")
    for client in (key_client(people.outsider_org), key_client(people.reseller)):
        for action in ("revoke", "rotate"):
            assert_problem(client.post(f"/api/v1/api-keys/{child_key.api_key.prefix}/{action}"), 404)
        assert child_key.api_key.prefix not in str(client.get("/api/v1/api-keys").json())
    assert_problem(key_client(people.client_org).post(
        f"/api/v1/api-keys/{acme_api.api_key.prefix}/revoke"), 404)
    child_key.api_key.refresh_from_db()
    assert child_key.api_key.is_active


def test_a_read_key_cannot_revoke_or_rotate(people, acme_api):
    reader = key_client(people.acme, scopes=("read",))
    for action in ("revoke", "rotate"):
        assert_problem(reader.post(f"/api/v1/api-keys/{acme_api.api_key.prefix}/{action}"), 403)
    acme_api.api_key.refresh_from_db()
    assert acme_api.api_key.is_active
