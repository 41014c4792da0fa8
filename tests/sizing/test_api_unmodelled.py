"""POST /api/v1/estimates and /api/v1/recommendations say which regime an estimate represents
and, for a layout the estimator cannot represent, `unmodelled: [...]` (issue 14)."""

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_key_issue
from tests.factories import OrganisationFactory


@pytest.fixture
def api(catalog):
    client = APIClient()
    key = api_key_issue(organisation=OrganisationFactory(), name="t").plaintext
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


def test_an_estimate_it_cannot_represent_says_unmodelled(api):
    body = {"model": "llama-2-7b", "training": {"finetune": "qlora", "seq_len": 2048},
            "parallel": {"dp": 4, "sharding": "zero3"}}
    response = api.post("/api/v1/estimates", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["unmodelled"] == ["QLoRA's NF4 weights under ZeRO-3 partitioning"]
    assert "finetune=qlora r=16" in response.json()["represents"]


def test_a_represented_estimate_and_a_recommended_plan_say_what_they_represent(api):
    body = {"model": "llama-3.1-8b", "parallel": {"dp": 8, "sharding": "fsdp-full-shard"}}
    estimate = api.post("/api/v1/estimates", body, format="json").json()
    assert estimate["unmodelled"] == [] and "sharding=fsdp-full-shard" in estimate["represents"]
    body = {"model": "llama-3.1-8b", "dataset_tokens": 200_000_000, "goal": {"kind": "cheapest"},
            "options": {"top_n": 2}}
    plans = api.post("/api/v1/recommendations", body, format="json").json()["plans"]
    assert plans and all(p["unmodelled"] == [] and p["represents"] for p in plans)
    assert all(p["time_model"] == "estimator" for p in plans)
    stored = api.post("/api/v1/estimates", {"plan": plans[0]}, format="json")
    assert stored.status_code == 200, stored.content
    assert stored.json()["per_gpu_bytes"]["total"] == plans[0]["per_gpu_total_bytes"]
    assert stored.json()["represents"] == plans[0]["represents"]
