"""A reseller's customers: /api/v1/customers."""

import pytest

from portal.accounts.models import Organisation
from tests.api.conftest import assert_problem, key_client
from tests.factories import OrganisationFactory


@pytest.fixture
def reseller_api(people):
    return key_client(people.reseller)


def test_a_reseller_creates_lists_and_renames_customers(people, reseller_api):
    response = reseller_api.post("/api/v1/customers", {"name": "Deep Labs"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["slug"] == "deep-labs"
    assert Organisation.objects.get(slug="deep-labs").parent == people.reseller
    slugs = [c["slug"] for c in reseller_api.get("/api/v1/customers").json()["results"]]
    assert slugs == ["deep-labs", "resale-client"]
    renamed = reseller_api.patch("/api/v1/customers/deep-labs", {"name": "Deep Labs GmbH"}, format="json")
    assert renamed.json()["name"] == "Deep Labs GmbH"
    assert reseller_api.get("/api/v1/customers/deep-labs").json()["name"] == "Deep Labs GmbH"


def test_input_is_validated(reseller_api):
    assert "name" in assert_problem(reseller_api.post("/api/v1/customers", {}, format="json"), 400)["errors"]
    response = reseller_api.post("/api/v1/customers", {"name": "X", "slug": "resale-client"}, format="json")
    assert "taken" in str(assert_problem(response, 409)["errors"]["slug"])


def test_creating_is_idempotent(reseller_api):
    first = reseller_api.post("/api/v1/customers", {"name": "Once"}, format="json",
                              HTTP_IDEMPOTENCY_KEY="c-1")
    again = reseller_api.post("/api/v1/customers", {"name": "Once"}, format="json",
                              HTTP_IDEMPOTENCY_KEY="c-1")
    assert again.status_code == 201 and again.json() == first.json()
    assert Organisation.objects.filter(name="Once").count() == 1


def test_a_customer_key_has_no_customers(people):
    client = key_client(people.acme)
    assert_problem(client.get("/api/v1/customers"), 403)
    assert_problem(client.post("/api/v1/customers", {"name": "Sneaky"}, format="json"), 403)
    assert not Organisation.objects.filter(name="Sneaky").exists()


def test_another_resellers_customer_is_a_404(people, reseller_api):
    OrganisationFactory(parent=OrganisationFactory(kind="reseller"), slug="theirs")
    assert_problem(reseller_api.get("/api/v1/customers/theirs"), 404)
    assert_problem(reseller_api.patch("/api/v1/customers/theirs", {"name": "x"}, format="json"), 404)


def test_a_read_key_cannot_create(people):
    client = key_client(people.reseller, scopes=["read"])
    assert client.get("/api/v1/customers").status_code == 200
    assert_problem(client.post("/api/v1/customers", {"name": "No"}, format="json"), 403)
    assert_problem(client.patch("/api/v1/customers/resale-client", {"name": "No"}, format="json"), 403)
