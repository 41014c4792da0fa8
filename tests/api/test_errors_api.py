"""One error format for /api/: application/problem+json, with field detail on validation."""

import json

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_key_issue, api_key_revoke
from portal.orders.states import OrderState
from tests.api.conftest import assert_problem, key_client
from tests.factories import make_order


@pytest.fixture
def acme_api(people, catalog):
    return key_client(people.acme)


def test_validation_is_a_problem_with_errors_by_field(acme_api):
    body = assert_problem(acme_api.post("/api/v1/quotes", {"sku": "nope"}, format="json"), 400,
                          "invalid")
    assert "sku" in body["errors"] and body["instance"] == "/api/v1/quotes"


def test_an_unknown_api_path_is_a_json_404_not_the_debug_page(acme_api):
    for method in ("get", "post", "delete"):
        body = assert_problem(getattr(acme_api, method)("/api/v1/nope"), 404, "not_found")
        assert "/api/docs/" in body["detail"]
    assert_problem(APIClient().get("/api/v2/orders"), 404)


def test_a_method_the_endpoint_lacks_is_a_405_problem(acme_api):
    assert_problem(acme_api.delete("/api/v1/quotes"), 405, "method_not_allowed")


def test_no_key_is_a_401_problem_with_www_authenticate(catalog):
    response = APIClient().get("/api/v1/catalog")
    assert_problem(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Api-Key")


def test_a_revoked_key_is_refused(people, catalog):
    issued = api_key_issue(organisation=people.acme, name="old")
    api_key_revoke(api_key=issued.api_key)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {issued.plaintext}")
    assert_problem(client.get("/api/v1/catalog"), 401, "authentication_failed")


def test_bearer_works_as_an_alias(people, catalog):
    assert key_client(people.acme, scheme="Bearer").get("/api/v1/catalog").status_code == 200


def test_a_read_key_cannot_write(people, catalog):
    client = key_client(people.acme, scopes=["read"])
    assert client.get("/api/v1/quotes").status_code == 200
    body = assert_problem(client.post("/api/v1/quotes", {"sku": "1x-l4-24gb"}, format="json"), 403,
                          "permission_denied")
    assert "read-only" in body["detail"]


def test_too_many_requests_is_a_429_with_retry_after(acme_api, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"api": "2/min"}}
    assert acme_api.get("/api/v1/quotes").status_code == 200
    assert acme_api.get("/api/v1/quotes").status_code == 200
    response = acme_api.get("/api/v1/quotes")
    body = assert_problem(response, 429, "throttled")
    assert int(response["Retry-After"]) > 0 and body["retry_after_seconds"] > 0


def test_a_deeply_nested_body_is_a_400_problem(acme_api):
    body = "[" * 100_000 + "]" * 100_000
    response = acme_api.generic("POST", "/api/v1/estimates", body, content_type="application/json")
    assert "nested deeper" in assert_problem(response, 400, "parse_error")["detail"]
    nested = {"model": "llama-3.1-8b", "plan": json.loads("{\"a\":" * 40 + "1" + "}" * 40)}
    response = acme_api.post("/api/v1/estimates", nested, format="json")
    assert "nested deeper" in assert_problem(response, 400)["detail"]


def test_an_oversized_body_is_a_400_problem(acme_api, settings):
    settings.API_MAX_BODY_BYTES = 1000
    response = acme_api.post("/api/v1/estimates", {"model": "x" * 2000}, format="json")
    assert "at most 1,000" in assert_problem(response, 400, "parse_error")["detail"]


def test_a_non_json_body_is_a_415_problem(acme_api):
    response = acme_api.post("/api/v1/quotes", "sku=1x-l4-24gb",
                             content_type="application/x-www-form-urlencoded")
    assert_problem(response, 415)


def test_a_business_rule_that_says_no_is_a_409_problem(people, catalog):
    from tests.factories import make_order

    order = make_order(people.acme, state="active")
    response = key_client(people.acme).post(f"/api/v1/orders/{order.reference}/cancel", {},
                                            format="json")
    assert "Cannot cancel" in assert_problem(response, 409, "conflict")["detail"]


def test_the_schema_and_docs_still_answer(client, db):
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/schema").status_code == 301  # APPEND_SLASH, not the API's 404


def test_an_unexpected_error_is_a_500_problem_not_an_html_page(acme_api, monkeypatch, caplog):
    from portal.api.v1.views import catalog as catalog_views

    def broken(**kwargs):
        raise RuntimeError("the database melted")

    monkeypatch.setattr(catalog_views, "catalog_snapshot", broken)
    response = acme_api.get("/api/v1/catalog")
    body = assert_problem(response, 500, "server_error")
    assert "melted" not in response.content.decode() and body["instance"] == "/api/v1/catalog"
    assert any(r.name == "django.request" and r.exc_info for r in caplog.records)


def test_a_500_outside_drf_under_api_is_a_problem_too(rf):
    from portal.api.views import server_error

    response = server_error(rf.get("/api/v1/orders"))
    assert response.status_code == 500 and response["Content-Type"] == "application/problem+json"
    assert server_error(rf.get("/orders/"))["Content-Type"].startswith("text/html")


def test_a_control_character_in_a_json_string_is_a_400_not_a_database_error(acme_api):
    for body in ({"sku": "1x-l4\u000024gb"}, {"sku": "1x-l4-24gb", "tracker\u0000": "x"},
                 {"sku": "1x-l4-24gb", "plan": {"model": ["a\u0001b"]}}):
        problem = assert_problem(acme_api.post("/api/v1/quotes", body, format="json"), 400, "parse_error")
        assert "control characters" in problem["detail"]



def test_tabs_and_newlines_are_not_control_characters_here(people, catalog):
    """The body's check lets them through (a cancellation reason keeps its lines); a name is one
    line, and says so (issue 28: this test used a customer's name, which now refuses them)."""
    order = make_order(people.reseller, state=OrderState.PENDING_APPROVAL)
    client = key_client(people.reseller)
    response = client.post(f"/api/v1/orders/{order.reference}/cancel",
                           {"reason": "Tab\tand\nnewline"}, format="json")
    assert response.status_code == 200, response.content
    problem = assert_problem(client.post("/api/v1/customers", {"name": "Tab\tand\nnewline"},
                                         format="json"), 400)
    assert "U+0009 TAB, U+000A LINE FEED" in problem["errors"]["name"][0]
