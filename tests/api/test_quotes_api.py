"""POST /api/v1/quotes and GET /api/v1/quotes/<reference>."""

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_key_issue
from portal.quotes.models import Quote
from tests.factories import OrganisationFactory


@pytest.fixture
def acme(catalog):
    return OrganisationFactory(slug="acme")


def client_for(org):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(organisation=org, name='t').plaintext}")
    return client


def test_it_creates_a_quote_for_the_keys_organisation(acme):
    response = client_for(acme).post("/api/v1/quotes", {
        "sku": "8x-h100-sxm-80gb", "node_count": 2, "network": "ib-ndr-400g", "nvme": "nvme-4tb-raid0",
        "storage_provider": "minio", "storage_tb": 2, "strategy": "fsdp",
        "plan": {"model": "llama-3.1-8b", "nodes": 2}}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    quote = Quote.objects.get(reference=body["reference"])
    assert quote.organisation == acme and body["organisation"] == "acme"
    assert response["Location"] == f"/api/v1/quotes/{quote.reference}"
    assert body["price_monthly"] == str(quote.price_monthly)
    assert body["plan"] == {"model": "llama-3.1-8b", "nodes": 2}
    assert body["price_lines"][0]["label"].endswith("× 2 nodes")
    assert body["is_valid"] is True


def test_defaults_pick_the_smallest_nvme_and_an_allowed_network(acme):
    body = client_for(acme).post("/api/v1/quotes", {"sku": "1x-l4-24gb"}, format="json").json()
    assert (body["nvme"], body["network"], body["node_count"]) == ("nvme-1tb-single", "eth-1g", 1)
    body = client_for(acme).post("/api/v1/quotes", {"sku": "8x-h100-sxm-80gb", "node_count": 4},
                                 format="json").json()
    assert body["network"] == "ib-hdr-200g"


def test_bad_input_is_a_400_by_field(acme):
    response = client_for(acme).post("/api/v1/quotes", {"sku": "nope", "node_count": 0}, format="json")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"sku", "node_count"}


def test_a_broken_rule_is_a_400_on_the_field(acme):
    response = client_for(acme).post("/api/v1/quotes", {
        "sku": "8x-h100-sxm-80gb", "node_count": 2, "network": "eth-1g"}, format="json")
    assert response.status_code == 400
    assert "single-node orders only" in response.json()["errors"]["network"][0]
    assert not Quote.objects.exists()


def test_it_reads_back_its_own_quote(acme):
    client = client_for(acme)
    reference = client.post("/api/v1/quotes", {"sku": "1x-l4-24gb"}, format="json").json()["reference"]
    response = client.get(f"/api/v1/quotes/{reference}")
    assert response.status_code == 200 and response.json()["reference"] == reference


def test_an_outsider_gets_404(acme):
    created = client_for(acme).post("/api/v1/quotes", {"sku": "1x-l4-24gb"}, format="json")
    reference = created.json()["reference"]
    assert client_for(OrganisationFactory()).get(f"/api/v1/quotes/{reference}").status_code == 404


def test_it_needs_a_key(acme):
    response = APIClient().post("/api/v1/quotes", {"sku": "1x-l4-24gb"}, format="json")
    assert response.status_code == 401  # not 403: the client is told to authenticate
    assert response.has_header("WWW-Authenticate")


@pytest.mark.parametrize("plan", [
    {"model": "llama-3.1-8b", "nodes": "two"},
    {"headroom_bytes": "lots"},
    {"per_gpu_total_bytes": [1, 2]},
    {"memory_breakdown_bytes": {"weights": "big"}},
    {"train_hours": True},
])
def test_a_plan_with_non_numeric_figures_is_a_400_on_plan(acme, plan):
    # Pages (quote, order, staff approval queue) compute with these figures: a reseller's typo
    # must be refused here, not break every staff member's approval queue later.
    response = client_for(acme).post("/api/v1/quotes", {"sku": "1x-l4-24gb", "plan": plan},
                                     format="json")
    assert response.status_code == 400, response.content
    assert "must be a number" in response.json()["errors"]["plan"][0]
    assert not Quote.objects.exists()


@pytest.mark.parametrize(("body", "text"), [
    ('{"sku": "1x-l4-24gb", "plan": {"nvme_tb": [1]}}', "nvme_tb must be a number"),  # was a TypeError
    ('{"sku": "1x-l4-24gb", "plan": {"nodes": 1e400}}', "finite numbers only"),  # inf: jsonb refused it
    ('{"sku": "1x-l4-24gb", "plan": {"workload": "llama"}}', "workload must be an object"),
])
def test_a_plan_the_database_or_pages_cannot_take_is_a_400_on_plan(acme, body, text):
    """(A NUL anywhere in a body is refused before: test_errors_api, control characters.)"""
    response = client_for(acme).generic("POST", "/api/v1/quotes", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert text in response.json()["errors"]["plan"][0]
    assert not Quote.objects.exists()


# --- list, customers, tenancy, idempotency (issue 13) --------------------------------------
def test_it_lists_quotes_newest_first_and_only_its_own(people, catalog):
    from tests.api.conftest import key_client

    client = key_client(people.acme)
    refs = [client.post("/api/v1/quotes", {"sku": "1x-l4-24gb"}, format="json").json()["reference"]
            for _ in range(2)]
    client_for(people.outsider_org).post("/api/v1/quotes", {"sku": "1x-l4-24gb"}, format="json")
    body = client.get("/api/v1/quotes").json()
    assert [q["reference"] for q in body["results"]] == refs[::-1]


def test_a_reseller_quotes_for_its_customer_and_the_child_cannot_see_the_resellers(people, catalog):
    from tests.api.conftest import assert_problem, key_client

    reseller = key_client(people.reseller)
    own = reseller.post("/api/v1/quotes", {"sku": "1x-l4-24gb"}, format="json").json()
    theirs = reseller.post("/api/v1/quotes", {"sku": "1x-l4-24gb", "customer": "resale-client"},
                           format="json").json()
    assert (own["organisation"], theirs["organisation"]) == ("gpu-resale", "resale-client")
    listed = reseller.get("/api/v1/quotes?customer=resale-client").json()["results"]
    assert [q["reference"] for q in listed] == [theirs["reference"]]
    child = key_client(people.client_org)
    assert_problem(child.get(f"/api/v1/quotes/{own['reference']}"), 404)
    assert child.get(f"/api/v1/quotes/{theirs['reference']}").status_code == 200
    response = child.post("/api/v1/quotes", {"sku": "1x-l4-24gb", "customer": "gpu-resale"},
                          format="json")
    assert "customer" in assert_problem(response, 400)["errors"]


def test_a_read_key_cannot_quote(people, catalog):
    from tests.api.conftest import assert_problem, key_client

    response = key_client(people.acme, scopes=["read"]).post("/api/v1/quotes", {"sku": "1x-l4-24gb"},
                                                             format="json")
    assert_problem(response, 403)
    assert not Quote.objects.exists()


def test_creating_a_quote_is_idempotent(people, catalog):
    client = client_for(people.acme)
    first = client.post("/api/v1/quotes", {"sku": "1x-l4-24gb"}, format="json", HTTP_IDEMPOTENCY_KEY="q")
    again = client.post("/api/v1/quotes", {"sku": "1x-l4-24gb"}, format="json", HTTP_IDEMPOTENCY_KEY="q")
    assert again.json() == first.json() and Quote.objects.count() == 1
    other = client.post("/api/v1/quotes", {"sku": "8x-h100-sxm-80gb"}, format="json",
                        HTTP_IDEMPOTENCY_KEY="q")
    assert other.status_code == 422
