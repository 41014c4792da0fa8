"""API clients per key: `api(org, scopes=…)` returns an APIClient sending that organisation's key."""

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_key_issue


def key_client(org, *, scopes=("read", "write"), scheme="Api-Key"):
    issued = api_key_issue(organisation=org, name="test", scopes=list(scopes))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {issued.plaintext}")
    client.api_key = issued.api_key
    return client


@pytest.fixture
def api():
    return key_client


def assert_problem(response, status: int, code: str | None = None) -> dict:
    """An RFC 9457 problem: the content type and the members every error carries."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status and body["title"] and body["type"] == "about:blank"
    assert "detail" in body
    if code is not None:
        assert body["code"] == code, body
    return body
