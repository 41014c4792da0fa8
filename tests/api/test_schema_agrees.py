"""Where schemathesis (`--checks all`) found the API answering otherwise than its schema says:
each case now agrees, refused with a problem (or accepted) as the schema states."""

import re
import uuid

import pytest
import yaml

from portal.sizing.recommend.types import MAX_TOKENS
from portal.webhooks.services import endpoint_create
from tests.accounts.ssh_keygen import new_public_key
from tests.api.conftest import assert_problem, key_client
from tests.factories import make_order

ESTIMATE = {"model": "llama-3.1-8b", "sku": "8x-h100-sxm-80gb", "training": {"seq_len": 4096},
            "parallel": {"dp": 8, "sharding": "zero3"}}


@pytest.fixture
def reseller_api(people, catalog):
    return key_client(people.reseller)


def _schema(client) -> dict:
    return yaml.safe_load(client.get("/api/schema/").content)


@pytest.mark.parametrize("limit", ["null", "0", "201", "-1", "2.5", "two"])
def test_a_limit_the_schema_forbids_is_a_400_not_the_default_page(reseller_api, limit):
    for path in ("/api/v1/orders", "/api/v1/quotes", "/api/v1/webhooks", "/api/v1/api-keys"):
        problem = assert_problem(reseller_api.get(f"{path}?limit={limit}"), 400)
        assert "from 1 to 200" in problem["errors"]["limit"][0]


def test_a_limit_given_twice_is_a_400_and_one_in_range_pages(reseller_api, people):
    assert_problem(reseller_api.get("/api/v1/orders?limit=1&limit=2"), 400)
    make_order(people.client_org)
    make_order(people.client_org)
    page = reseller_api.get("/api/v1/orders?limit=1").json()
    assert len(page["results"]) == 1 and page["next"]


def test_the_schema_states_the_limit_range_and_the_path_patterns(reseller_api):
    schema = _schema(reseller_api)
    orders = schema["paths"]["/api/v1/orders"]["get"]["parameters"]
    (limit,) = [p for p in orders if p["name"] == "limit"]
    assert limit["schema"] == {"type": "integer", "minimum": 1, "maximum": 200}
    (reference,) = schema["paths"]["/api/v1/orders/{reference}"]["get"]["parameters"]
    assert reference["schema"]["pattern"] == "^[A-Z]{1,2}-[0-9A-F]{8}$"
    (slug,) = schema["paths"]["/api/v1/customers/{slug}"]["get"]["parameters"]
    assert slug["schema"]["pattern"] == "^[-a-zA-Z0-9_]+$"


@pytest.mark.parametrize("path", ["/api/v1/orders/o-1234abcd", "/api/v1/quotes/Q-123",
                                  "/api/v1/webhooks/WH-12345678x", "/api/v1/api-keys/XYZ/revoke",
                                  "/api/v1/customers/a%20b"])
def test_a_path_that_names_no_object_by_its_pattern_is_a_problem_404(reseller_api, path):
    call = reseller_api.post if path.endswith("/revoke") else reseller_api.get
    assert_problem(call(path), 404)


def test_an_empty_customer_filter_lists_every_customer_as_the_schema_now_says(reseller_api, people):
    make_order(people.client_org)
    everything = reseller_api.get("/api/v1/orders").json()["results"]
    assert reseller_api.get("/api/v1/orders?customer=").json()["results"] == everything
    parameters = _schema(reseller_api)["paths"]["/api/v1/orders"]["get"]["parameters"]
    (customer,) = [p for p in parameters if p["name"] == "customer"]
    assert "minLength" not in customer["schema"]


def test_patch_renames_only_what_is_sent(reseller_api, people):
    slug = people.client_org.slug
    unchanged = reseller_api.patch(f"/api/v1/customers/{slug}", {}, format="json")
    assert unchanged.status_code == 200, unchanged.content
    assert unchanged.json()["name"] == people.client_org.name
    renamed = reseller_api.patch(f"/api/v1/customers/{slug}", {"name": "Renamed Ltd"}, format="json")
    assert renamed.json()["name"] == "Renamed Ltd"


@pytest.mark.parametrize("enabled", [0, 1, "true", "yes", None])
def test_a_webhook_flag_is_json_true_or_false_only(reseller_api, people, enabled):
    endpoint, _secret = endpoint_create(organisation=people.reseller, url="https://hooks.example.com/in")
    response = reseller_api.patch(f"/api/v1/webhooks/{endpoint.reference}", {"enabled": enabled},
                                  format="json")
    assert "enabled" in assert_problem(response, 400)["errors"]
    endpoint.refresh_from_db()
    assert endpoint.enabled is True  # nothing changed
    turned_off = reseller_api.patch(f"/api/v1/webhooks/{endpoint.reference}", {"enabled": False},
                                    format="json")
    assert turned_off.status_code == 200 and turned_off.json()["enabled"] is False


@pytest.mark.parametrize("tokens", [MAX_TOKENS + 1, "1e12", True])
def test_train_tokens_past_the_maximum_or_not_a_number_is_refused(reseller_api, tokens):
    response = reseller_api.post("/api/v1/estimates", {**ESTIMATE, "train_tokens": tokens}, format="json")
    assert "train_tokens" in assert_problem(response, 400)["errors"]


def test_train_tokens_in_range_is_estimated(reseller_api):
    response = reseller_api.post("/api/v1/estimates", {**ESTIMATE, "train_tokens": 1e12}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["compute"]["train_tokens"] == 1e12


@pytest.mark.parametrize(("method", "path", "body"), [
    ("patch", "/api/v1/customers/{customer}", {"name": 0}),
    ("post", "/api/v1/customers", {"name": "Numbers Ltd", "slug": 0}),
    ("post", "/api/v1/api-keys", {"name": 0}),
    ("post", "/api/v1/webhooks", {"url": "https://hooks.example.com/in", "description": 0}),
    ("post", "/api/v1/estimates", {**ESTIMATE, "gpu": 0}),
    ("post", "/api/v1/estimates", {**ESTIMATE, "parallel": {"dp": 1, "sp": 0}}),
])
def test_a_number_or_0_where_the_schema_says_string_or_boolean_is_refused(reseller_api, people, method, path,
                                                                           body):
    """DRF's fields took 0 for a string (stored "0") and for a boolean (False)."""
    path = path.format(customer=people.client_org.slug)
    response = getattr(reseller_api, method)(path, body, format="json",
                                             HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))
    field = next(name for name, value in body.items() if value == 0 or isinstance(value, dict) and 0 in
                 value.values())
    assert field in assert_problem(response, 400)["errors"]
    people.client_org.refresh_from_db()
    assert people.client_org.name != "0"


def test_request_shapes_state_non_blank_strings_and_non_empty_lists(reseller_api):
    components = _schema(reseller_api)["components"]["schemas"]
    assert components["ApiKeyInputRequest"]["properties"]["name"]["minLength"] == 1
    assert components["WebhookEndpointInputRequest"]["properties"]["event_types"]["minItems"] == 1
    custom = components["CustomStorageInputRequest"]["properties"]
    assert all(custom[name]["minLength"] == 1 for name in ("bucket", "access_key_id", "secret_key"))
    assert_problem(reseller_api.post("/api/v1/api-keys", {"name": ""}, format="json",
                                     HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())), 400)


def test_an_empty_query_value_is_documented_as_left_out_and_answers_so(reseller_api, people):
    make_order(people.client_org)
    everything = reseller_api.get("/api/v1/orders").json()["results"]
    assert reseller_api.get("/api/v1/orders?created_after=&created_before=").json()["results"] == everything
    this_month = reseller_api.get("/api/v1/usage").json()["month"]
    assert reseller_api.get("/api/v1/usage?month=").json()["month"] == this_month
    schema = _schema(reseller_api)
    parameters = {p["name"]: p for p in schema["paths"]["/api/v1/orders"]["get"]["parameters"]}
    assert parameters["created_after"]["allowEmptyValue"] is True
    assert "allowEmptyValue" not in parameters["limit"]  # ?limit= is a 400
    assert_problem(reseller_api.get("/api/v1/orders?limit="), 400)
    usage = {p["name"]: p for p in schema["paths"]["/api/v1/usage"]["get"]["parameters"]}
    assert usage["month"]["allowEmptyValue"] is True


def test_the_schema_says_no_string_holds_a_control_character(reseller_api):
    schema = _schema(reseller_api)
    name = schema["components"]["schemas"]["PatchedCustomerUpdateRequest"]["properties"]["name"]
    assert re.fullmatch(name["pattern"], "Acme Ltd") and not re.search(name["pattern"], "Acme\x01Ltd")
    (number,) = schema["paths"]["/api/v1/invoices/{number}"]["get"]["parameters"]
    assert not re.search(number["schema"]["pattern"], "INV\x03-1")
    assert_problem(reseller_api.get("/api/v1/invoices/INV%03-1"), 400)
    cursor = [p for p in schema["paths"]["/api/v1/orders"]["get"]["parameters"] if p["name"] == "cursor"]
    assert not re.search(cursor[0]["schema"]["pattern"], "a\x00b")


@pytest.mark.parametrize(("month", "valid"), [("2026-12", True), ("0001-01", True), ("2026-13", False),
                                              ("2026-00", False), ("0000-05", False)])
def test_the_usage_month_pattern_is_the_months_the_api_takes(reseller_api, month, valid):
    parameters = _schema(reseller_api)["paths"]["/api/v1/usage"]["get"]["parameters"]
    (pattern,) = [p["schema"]["pattern"] for p in parameters if p["name"] == "month"]
    assert bool(re.fullmatch(pattern, month)) is valid
    if not valid:
        assert "month" in assert_problem(reseller_api.get(f"/api/v1/usage?month={month}"), 400)["errors"]


@pytest.mark.parametrize("path", ["/api/v1/estimates", "/api/v1/recommendations"])
def test_a_model_is_named_one_way_as_the_schema_now_says(reseller_api, path):
    """An empty hf_config beside a preset was taken (and ignored); the schema said nothing of the
    one-of rule."""
    body = {**ESTIMATE, "hf_config": {}} if path.endswith("estimates") else {"model": "gpt2-124m",
                                                                              "hf_config": {}}
    assert "model" in assert_problem(reseller_api.post(path, body, format="json"), 400)["errors"]
    name = "EstimateInputRequest" if path.endswith("estimates") else "RecommendationInputRequest"
    shape = _schema(reseller_api)["components"]["schemas"][name]
    sources = [option["required"] for option in shape["oneOf"]]
    assert ["model"] in sources and ["hf_config"] in sources
    assert shape["properties"]["hf_config"]["minProperties"] == 1


def test_an_estimate_plan_is_sent_alone_as_the_schema_says(reseller_api):
    shape = _schema(reseller_api)["components"]["schemas"]["EstimateInputRequest"]
    assert {"not": {"required": ["plan", "training"]}} in shape["allOf"]
    body = {"plan": {"schema_version": 1}, "training": {"seq_len": 1024}}
    response = reseller_api.post("/api/v1/estimates", body, format="json")
    assert "plan" in assert_problem(response, 400)["errors"]


def test_a_slug_or_an_ssh_key_already_taken_is_a_409_naming_the_field(reseller_api, people):
    """Was a 400 for a request the schema allows; a conflict with what exists is the 409 it lists."""
    taken = reseller_api.post("/api/v1/customers", {"name": "Again", "slug": people.client_org.slug},
                              format="json")
    assert "slug" in assert_problem(taken, 409, "taken")["errors"]
    line = new_public_key()
    assert reseller_api.post("/api/v1/ssh-keys", {"public_key": line}, format="json").status_code == 201
    again = reseller_api.post("/api/v1/ssh-keys", {"public_key": line}, format="json")
    assert "already added" in assert_problem(again, 409, "taken")["errors"]["public_key"][0]
    responses = _schema(reseller_api)["paths"]["/api/v1/ssh-keys"]["post"]["responses"]
    assert "taken" in responses["409"]["description"]
