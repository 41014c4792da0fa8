"""GET /api/v1/catalog."""

from portal.accounts.services import api_key_revoke
from tests.api.conftest import assert_problem, key_client
from tests.factories import make_node


def test_it_lists_gpus_skus_with_stock_and_options(people, catalog, sim_dir):
    make_node(sku="1x-l4-24gb", state_dir=sim_dir)
    body = key_client(people.acme, scopes=["read"]).get("/api/v1/catalog").json()
    skus = {s["slug"]: s for s in body["skus"]}
    assert skus["1x-l4-24gb"]["stock"] == 1 and skus["8x-h100-sxm-80gb"]["stock"] == 0
    assert skus["1x-l4-24gb"]["price_hourly"]
    assert {"gpus", "nvme", "networks", "storage", "stack"} <= set(body)
    assert any(n["slug"] == "eth-1g" for n in body["networks"])


def test_a_revoked_key_is_refused(people, catalog):
    client = key_client(people.acme)
    api_key_revoke(api_key=client.api_key)
    assert_problem(client.get("/api/v1/catalog"), 401)


def test_the_catalog_is_read_only(people, catalog):
    assert_problem(key_client(people.acme).post("/api/v1/catalog", {}, format="json"), 405)
