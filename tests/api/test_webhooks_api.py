"""Webhook endpoints over /api/v1/: create (secret once), validation, list, update, delete,
rotate, test event, delivery log; tenancy (outsider, child, reseller), scopes, revoked keys."""

import pytest

from portal.accounts.services import api_key_revoke
from portal.webhooks.delivery import delivery_attempt
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint
from portal.webhooks.services import endpoint_create
from tests.api.conftest import assert_problem, key_client
from tests.conftest import LOOPBACK_NETWORKS
from tests.webhooks.receiver import receiver_verifies

URL = "https://hooks.example.com/trainyard"


@pytest.fixture
def reseller_api(people):
    return key_client(people.reseller)


def _create(client, **body):
    return client.post("/api/v1/webhooks", {"url": URL, **body}, format="json")


def test_it_creates_an_endpoint_and_shows_the_secret_once(reseller_api):
    response = _create(reseller_api, event_types=["server.ready", "order.state_changed"])
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["secret"].startswith("whsec_") and body["enabled"] is True
    assert body["event_types"] == ["order.state_changed", "server.ready"]
    assert response["Location"] == f"/api/v1/webhooks/{body['id']}"
    endpoint = WebhookEndpoint.objects.get(reference=body["id"])
    assert endpoint.secret == body["secret"]
    again = reseller_api.get(f"/api/v1/webhooks/{body['id']}").json()
    assert "secret" not in again and again["url"] == URL
    assert [e["id"] for e in reseller_api.get("/api/v1/webhooks").json()["results"]] == [body["id"]]


@pytest.mark.parametrize(("body", "field"), [
    ({"url": "http://hooks.example.com/in"}, "url"),
    ({"url": "ftp://hooks.example.com/in"}, "url"),
    ({"url": "https://user:pw@hooks.example.com/in"}, "url"),
    ({"url": "not a url"}, "url"),
    ({"url": URL, "event_types": ["order.exploded"]}, "event_types"),
    ({"url": URL, "event_types": []}, "event_types"),
    ({}, "url"),
])
def test_it_validates_input_and_creates_nothing(reseller_api, body, field):
    problem = assert_problem(reseller_api.post("/api/v1/webhooks", body, format="json"), 400, "invalid")
    assert field in problem["errors"]
    assert not WebhookEndpoint.objects.exists()


def test_plain_http_is_for_loopback_only_and_only_where_allowed(reseller_api, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    assert _create(reseller_api, url="http://127.0.0.1:8080/in").status_code == 201
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    assert_problem(_create(reseller_api, url="http://localhost:8080/in"), 400, "invalid")


def test_it_updates_disables_enables_and_deletes(reseller_api):
    ref = _create(reseller_api).json()["id"]
    response = reseller_api.patch(f"/api/v1/webhooks/{ref}", {"enabled": False, "description": "shop"},
                                  format="json")
    assert response.status_code == 200 and response.json()["enabled"] is False
    assert_problem(reseller_api.post(f"/api/v1/webhooks/{ref}/test"), 409, "conflict")
    assert reseller_api.patch(f"/api/v1/webhooks/{ref}", {"enabled": True}, format="json").json()[
        "disabled_reason"] == ""
    assert_problem(reseller_api.patch(f"/api/v1/webhooks/{ref}", {"url": "http://x.example"},
                                      format="json"), 400, "invalid")
    assert reseller_api.delete(f"/api/v1/webhooks/{ref}").status_code == 204
    assert_problem(reseller_api.get(f"/api/v1/webhooks/{ref}"), 404)


def test_rotating_the_secret_is_idempotent_and_shows_the_new_one_once(reseller_api):
    created = _create(reseller_api).json()
    path = f"/api/v1/webhooks/{created['id']}/rotate-secret"
    first = reseller_api.post(path, HTTP_IDEMPOTENCY_KEY="rotate-1")
    replay = reseller_api.post(path, HTTP_IDEMPOTENCY_KEY="rotate-1")
    assert first.status_code == replay.status_code == 200
    assert first.json() == replay.json() and replay["Idempotent-Replayed"] == "true"
    assert first.json()["secret"] != created["secret"]
    assert WebhookEndpoint.objects.get(reference=created["id"]).secret == first.json()["secret"]


def test_creating_with_an_idempotency_key_creates_one_endpoint(reseller_api):
    first = reseller_api.post("/api/v1/webhooks", {"url": URL}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    second = reseller_api.post("/api/v1/webhooks", {"url": URL}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert first.json() == second.json() and WebhookEndpoint.objects.count() == 1


def test_the_test_event_reaches_a_receiver_and_the_log_shows_it(
        reseller_api, httpserver, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    httpserver.expect_request("/hook", method="POST").respond_with_data("nope", status=500)
    created = _create(reseller_api, url=httpserver.url_for("/hook")).json()
    response = reseller_api.post(f"/api/v1/webhooks/{created['id']}/test")
    assert response.status_code == 202 and response.json()["event_type"] == "webhook.test"
    delivery_attempt(delivery_id=response.json()["id"])  # what the worker does (see test_delivery_worker)
    request, _ = httpserver.log[0]
    assert receiver_verifies(created["secret"], request.headers["Trainyard-Signature"], request.get_data())
    [row] = reseller_api.get(f"/api/v1/webhooks/{created['id']}/deliveries").json()["results"]
    assert (row["state"], row["attempts"]) == ("pending", 1)
    assert row["log"][0]["status_code"] == 500 and row["log"][0]["error"] == "HTTP 500"
    assert isinstance(row["log"][0]["duration_ms"], int)


def test_tenancy_outsiders_and_children_get_404_resellers_see_their_customers(people):
    reseller_hook, _ = endpoint_create(organisation=people.reseller, url=URL)
    child_hook, _ = endpoint_create(organisation=people.client_org, url=URL)
    outsider, child, reseller = (key_client(people.outsider_org), key_client(people.client_org),
                                 key_client(people.reseller))
    for client, ref in [(outsider, reseller_hook.reference), (outsider, child_hook.reference),
                        (child, reseller_hook.reference)]:
        for method, path in [("get", ""), ("patch", ""), ("delete", ""), ("post", "/test"),
                             ("post", "/rotate-secret"), ("get", "/deliveries")]:
            assert_problem(getattr(client, method)(f"/api/v1/webhooks/{ref}{path}", {}, format="json"), 404)
    assert outsider.get("/api/v1/webhooks").json()["results"] == []
    assert [e["id"] for e in child.get("/api/v1/webhooks").json()["results"]] == [child_hook.reference]
    seen = {e["id"] for e in reseller.get("/api/v1/webhooks").json()["results"]}
    assert seen == {reseller_hook.reference, child_hook.reference}
    assert WebhookEndpoint.objects.filter(enabled=True).count() == 2
    assert not WebhookDelivery.objects.exists()


def test_a_read_key_cannot_write_and_a_revoked_key_is_refused(people):
    reader = key_client(people.reseller, scopes=("read",))
    assert_problem(_create(reader), 403)
    hook, _ = endpoint_create(organisation=people.reseller, url=URL)
    assert_problem(reader.post(f"/api/v1/webhooks/{hook.reference}/test"), 403)
    assert reader.get(f"/api/v1/webhooks/{hook.reference}").status_code == 200
    api_key_revoke(api_key=reader.api_key)
    assert_problem(reader.get("/api/v1/webhooks"), 401)
