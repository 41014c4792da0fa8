"""POST /api/v1/estimates and /api/v1/recommendations answer the pure modules' JSON."""

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_key_issue
from portal.sizing.catalog_live import catalog_from_db
from portal.sizing.estimator import ParallelConfig, TrainingConfig, estimate, get_preset
from portal.sizing.plan_tokens import plan_unsign
from portal.sizing.recommend import Goal, Workload, recommend
from tests.factories import OrganisationFactory
from tests.sizing.test_views_wizard import LLAMA_CONFIG, _first_token, inputs


@pytest.fixture
def api(catalog):
    client = APIClient()
    key = api_key_issue(organisation=OrganisationFactory(), name="t").plaintext
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


def test_estimate_matches_the_estimator(api):
    body = {"model": "llama-3.1-8b", "training": {"seq_len": 4096, "micro_batch": 2},
            "parallel": {"dp": 8, "sharding": "zero3"}}
    response = api.post("/api/v1/estimates", body, format="json")
    assert response.status_code == 200, response.content
    expected = estimate(get_preset("llama-3.1-8b"), TrainingConfig(seq_len=4096, micro_batch=2),
                        ParallelConfig(dp=8, sharding="zero3")).to_dict()
    assert response.json()["per_gpu_bytes"] == expected["per_gpu_bytes"]
    assert response.json()["compute"] is None


def test_estimate_with_a_sku_is_timed(api):
    response = api.post("/api/v1/estimates", {"model": "llama-3.1-8b", "sku": "8x-h100-sxm-80gb",
                                              "parallel": {"dp": 8, "sharding": "fsdp-full-shard"},
                                              "train_tokens": 1e9}, format="json")
    body = response.json()
    assert body["fits"] is True and body["compute"]["time_to_train_seconds"] > 0


def test_estimate_from_an_hf_config(api):
    config = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257,
              "n_positions": 1024}
    response = api.post("/api/v1/estimates", {"hf_config": config, "training": {"seq_len": 1024}},
                        format="json")
    assert response.status_code == 200
    assert response.json()["params"]["total"] == 124_439_808


@pytest.mark.parametrize(("body", "field", "text"), [
    ({"model": "gpt-17"}, "model", "Unknown model"),
    ({}, "model", "either a preset name or an hf_config"),
    ({"hf_config": {"model_type": "llama"}}, "hf_config", "config.json has no vocab_size"),
    ({"model": "llama-3.1-8b", "parallel": {"tp": 3}}, "non_field_errors", "tp=3 does not divide"),
    ({"model": "llama-3.1-8b", "sku": "nope"}, "non_field_errors", "unknown SKU"),
    ({"model": "llama-3.1-8b", "sku": "8x-a100-sxm-80gb", "training": {"precision": "fp8"}},
     "non_field_errors", "no FP8 tensor cores"),
    ({"hf_config": {"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048, "num_hidden_layers": 2,
                    "num_attention_heads": 16, "intermediate_size": 5632, "head_dim": "x"}},
     "hf_config", "head_dim must be a whole number"),
    ({"hf_config": {"model_type": "gpt2", "n_embd": 768, "n_layer": 2, "n_head": 12, "vocab_size": 100,
                    "n_positions": "1024"}}, "hf_config", "max_position_embeddings must be a whole number"),
])
def test_estimate_bad_input_is_a_400_that_says_why(api, body, field, text):
    response = api.post("/api/v1/estimates", body, format="json")
    assert response.status_code == 400
    assert text in str(response.json()["errors"][field])


def test_recommendation_matches_the_recommender(api):
    body = {"model": "llama-3.1-8b", "dataset_tokens": 200_000_000, "goal": {"kind": "cheapest"},
            "options": {"top_n": 3},  # and, given, the values the Workload below defaults to:
            "dataset_bytes": 0, "dataset_files": 1, "global_batch_tokens": 4 * 2**20}
    response = api.post("/api/v1/recommendations", body, format="json")
    assert response.status_code == 200, response.content
    from portal.sizing.recommend import SearchOptions

    expected = recommend(Workload(model="llama-3.1-8b", dataset_tokens=200_000_000), Goal("cheapest"),
                         catalog_from_db(), SearchOptions(top_n=3)).to_dict()
    got = response.json()
    assert [p["sku"] for p in got["plans"]] == [p["sku"] for p in expected["plans"]]
    assert got["plans"][0] == expected["plans"][0]
    assert len(got["plans"]) == 3 and got["points"]


def test_goal_as_a_string_is_shorthand_for_the_object(api):
    body = {"model": "llama-3.1-8b", "dataset_tokens": 200_000_000, "options": {"top_n": 2}}
    short = api.post("/api/v1/recommendations", body | {"goal": "cheapest"}, format="json")
    full = api.post("/api/v1/recommendations", body | {"goal": {"kind": "cheapest"}}, format="json")
    assert short.status_code == full.status_code == 200, short.content
    assert short.json()["goal"]["kind"] == "cheapest"
    assert [p["sku"] for p in short.json()["plans"]] == [p["sku"] for p in full.json()["plans"]]


@pytest.mark.parametrize(("goal", "text"), [
    ("deadline", 'Give {"kind": "deadline", "deadline_hours": …}'),
    ("quickest", "Use fastest or cheapest, or an object"),
    (5, "Expected a dictionary"),
])
def test_a_goal_shorthand_that_cannot_work_says_why(api, goal, text):
    response = api.post("/api/v1/recommendations", {"model": "llama-3.1-8b", "dataset_tokens": 10**9,
                                                    "goal": goal}, format="json")
    assert response.status_code == 400
    assert text in str(response.json()["errors"]["goal"])


def test_recommendation_bad_goal_says_what_is_missing(api):
    response = api.post("/api/v1/recommendations", {"model": "llama-3.1-8b", "dataset_tokens": 10**9,
                                                    "goal": {"kind": "deadline"}}, format="json")
    assert response.status_code == 400
    assert "deadline_hours" in str(response.json())


@pytest.mark.parametrize(("body", "text"), [
    # 10**400 was an OverflowError, epochs 1e300 too (int(inf)); now the field's bound says no.
    ({"dataset_tokens": 10**400}, "less than or equal to 1000000000000000000"),
    ({"dataset_tokens": 10**10, "epochs": 1e300}, "less than or equal to 1000"),
    ({"dataset_tokens": 10**16, "epochs": 1000}, "tokens to train"),  # each in range, not together
    ({"dataset_tokens": 10**9, "options": {"strategies": ["zero4"]}}, "unknown strategy 'zero4'"),
    ({"hf_config": {"model_type": "gpt2", "n_embd": 768, "n_layer": 2, "n_head": 12, "vocab_size": 100,
                    "n_positions": 1024, "activation_function": ["gelu"]}, "dataset_tokens": 10**9,
      "seq_len": 1024, "global_batch_tokens": 1024 * 64}, "activation must be text"),  # unhashable
])
def test_recommendation_bad_input_is_a_400_that_says_why(api, body, text):
    body = {"model": "llama-3.1-8b"} | body if "hf_config" not in body else body
    response = api.post("/api/v1/recommendations", body, format="json")
    assert response.status_code == 400, response.content
    assert text in str(response.json())


def test_sizing_endpoints_need_a_key(catalog):
    response = APIClient().post("/api/v1/estimates", {"model": "llama-3.1-8b"}, format="json")
    assert response.status_code in (401, 403)


def test_the_api_answers_the_same_plan_as_the_wizard_page(api, client):
    page_plan = plan_unsign(_first_token(client.post("/sizing/", inputs(go="results")).content.decode()))
    workload = page_plan["workload"]
    body = {key: workload[key] for key in ("model", "finetune", "precision", "seq_len",
                                           "global_batch_tokens", "dataset_tokens", "dataset_files",
                                           "epochs", "train_tokens")}
    response = api.post("/api/v1/recommendations", body | {"goal": {"kind": workload["goal"]}},
                        format="json")
    assert response.status_code == 200, response.content
    api_plan = response.json()["plans"][0]
    for key in ("sku", "nodes", "network", "strategy", "tp", "pp", "micro_batch", "grad_accum",
                "checkpointing", "per_gpu_total_bytes", "train_hours", "price_total_usd"):
        assert api_plan[key] == page_plan[key], key


def test_search_options_are_bounded(api):
    body = {"model": "llama-3.1-8b", "dataset_tokens": 10**8,
            "options": {"node_counts": list(range(1, 200))}}
    response = api.post("/api/v1/recommendations", body, format="json")
    assert response.status_code == 400
    assert "node_counts" in response.json()["errors"]["options"]


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b", "bert-base", "config.json"])
def test_a_stored_plan_re_estimates_through_the_api_to_the_same_bytes(api, model):
    body = {"dataset_tokens": 10**8, "seq_len": 512, "global_batch_tokens": 512 * 64,
            "options": {"top_n": 3}}
    body |= {"hf_config": LLAMA_CONFIG} if model == "config.json" else {"model": model}
    plans = api.post("/api/v1/recommendations", body, format="json").json()["plans"]
    for plan in plans:
        response = api.post("/api/v1/estimates", {"plan": plan}, format="json")
        assert response.status_code == 200, response.content
        again = response.json()
        assert again["per_gpu_bytes"]["total"] == plan["per_gpu_total_bytes"]
        assert {k: again["per_gpu_bytes"][k] for k in plan["memory_breakdown_bytes"]} == \
            plan["memory_breakdown_bytes"]
        # Timed on the plan's own SKU and network, with its MFU: the same step time.
        assert again["compute"]["step_seconds"] == pytest.approx(plan["step_seconds"], abs=1e-4)
        # sized by today's estimator model: not from an older one
        assert again["plan_estimator_version"] == again["estimator_version"]
        assert again["from_older_model"] is False


def test_a_plan_stored_before_estimator_versions_says_it_was_sized_by_an_older_model(api):
    body = {"model": "llama-3.1-8b", "dataset_tokens": 10**8, "seq_len": 512, "global_batch_tokens": 512 * 64}
    plan = api.post("/api/v1/recommendations", body, format="json").json()["plans"][0]
    plan["estimator_regime"].pop("version")
    answer = api.post("/api/v1/estimates", {"plan": plan}, format="json").json()
    assert (answer["plan_estimator_version"], answer["from_older_model"]) == (1, True)


def test_a_quotes_plan_from_the_wizard_re_estimates_through_the_api(api, client):
    page_plan = plan_unsign(_first_token(client.post("/sizing/", inputs(go="results")).content.decode()))
    response = api.post("/api/v1/estimates", {"plan": page_plan}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["per_gpu_bytes"]["total"] == page_plan["per_gpu_total_bytes"]


@pytest.mark.parametrize(("plan", "text"), [
    ({"model": "llama-3.1-8b", "nodes": 2}, "has no schema_version"),
    ({"schema_version": 1, "model": "llama-3.1-8b"}, "lacks"),
    ({"schema_version": 7}, "not one this server reads"),
])
def test_a_plan_that_cannot_be_re_estimated_is_a_400_on_plan(api, plan, text):
    response = api.post("/api/v1/estimates", {"plan": plan}, format="json")
    assert response.status_code == 400
    assert text in response.json()["errors"]["plan"][0]


def test_a_plan_is_sent_alone(api):
    response = api.post("/api/v1/estimates", {"plan": {"schema_version": 1}, "model": "llama-3.1-8b"},
                        format="json")
    assert response.status_code == 400
    assert "send the plan alone, without model" in response.json()["errors"]["plan"][0]


def test_an_api_request_naming_only_the_model_asks_what_the_wizard_asks_by_default(catalog):
    """One source of defaults: the wizard's first results page and the API's least request."""
    from portal.api.v1.serializers import RecommendationInputSerializer
    from portal.sizing.forms import WizardForm

    form = WizardForm.from_query({"preset": "llama-3.1-8b"})
    assert form.is_valid(), form.errors
    api = RecommendationInputSerializer(data={"model": "llama-3.1-8b"})
    assert api.is_valid(), api.errors
    workload, goal, options = api.request()
    assert workload == form.workload()
    assert goal == form.goal_spec() and goal.kind == "cheapest"
    assert options == form.search_options()
    assert (workload.dataset_tokens, workload.dataset_files, workload.global_batch_tokens) == (
        500_000_000, 1000, 256 * 4096)


def test_a_read_key_may_ask_for_estimates_and_recommendations(people, catalog):
    from tests.api.conftest import key_client

    reader = key_client(people.acme, scopes=["read"])
    assert reader.post("/api/v1/estimates", {"model": "llama-3.1-8b"}, format="json").status_code == 200
    response = reader.post("/api/v1/recommendations", {"model": "llama-3.1-8b", "options": {"top_n": 1}},
                           format="json")
    assert response.status_code == 200, response.content


# --- what an estimate represents (issue 14) ---------------------------------------------------
def test_an_estimate_it_cannot_represent_says_unmodelled(api):
    body = {"model": "llama-2-7b", "parallel": {"dp": 4, "sharding": "zero3"},
            "training": {"finetune": "qlora", "seq_len": 2048, "quant_storage": "uint8"}}
    response = api.post("/api/v1/estimates", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["unmodelled"] == [
        "QLoRA's NF4 weights in uint8 storage under ZeRO-3 (store them in the half dtype: quant_storage)"]
    assert "finetune=qlora r=16" in response.json()["represents"]
    del body["training"]["quant_storage"]  # auto: the half type, as the stacks render it: ZeRO-3 shards them
    half = api.post("/api/v1/estimates", body, format="json").json()
    assert half["unmodelled"] == [] and "quant_storage=bf16" in half["represents"]


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


def test_the_api_takes_use_dora_for_recommendations_and_estimates(api):
    body = {"model": "llama-3.1-8b", "finetune": "lora", "use_dora": True, "dataset_tokens": 10**8,
            "options": {"top_n": 2}}
    response = api.post("/api/v1/recommendations", body, format="json")
    assert response.status_code == 200, response.content
    assert all(p["estimator_regime"]["training"]["use_dora"] is True for p in response.json()["plans"])
    training = {"finetune": "lora", "lora_rank": 16, "seq_len": 1024}
    lora, dora = (api.post("/api/v1/estimates", {"model": "llama-3.1-8b", "sku": "8x-h100-sxm-80gb",
                                                 "training": {**training, **extra}}, format="json").json()
                  for extra in ({}, {"use_dora": True}))
    assert dora["params"]["trainable"] > lora["params"]["trainable"]
    assert dora["per_gpu_bytes"]["activations"] > lora["per_gpu_bytes"]["activations"]
    assert dora["compute"]["step_seconds"] > lora["compute"]["step_seconds"]


@pytest.mark.parametrize(("body", "text"), [
    ({"finetune": "qlora", "use_dora": True}, "it needs finetune='lora', not 'qlora'"),
    ({"finetune": "lora", "use_dora": True, "options": {"tp_sizes": [4]}}, "tensor parallel 1 only"),
    ({"finetune": "lora", "use_dora": "yes"}, "Must be a valid boolean"),
])
def test_the_api_refuses_dora_it_cannot_size_with_a_400(api, body, text):
    response = api.post("/api/v1/recommendations", {"model": "llama-3.1-8b", "dataset_tokens": 10**8, **body},
                        format="json")
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith("application/problem+json")
    assert text in str(response.json())
