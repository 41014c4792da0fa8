"""DoRA as a customer orders it: the wizard's box and the API's use_dora reach the recommender,
its plans carry use_dora in their estimator regime (re-estimated to the same numbers), the quote
says it, and adapters.json renders it as PEFT reads it. What DoRA is not modelled for is a clear
error (the API's side: tests/api/test_sizing_api.py)."""

import json

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.plan_tokens import plan_unsign
from portal.sizing.recommend import Goal, SearchOptions, Workload, recommend
from portal.sizing.services import estimate_stored_plan
from provisioning.stack.adapters import adapters_config
from tests.sizing.test_stack_regimes import inputs as stack_inputs
from tests.sizing.test_views_wizard import _first_token, inputs

SMALL_JOB = {"dataset_tokens": 10**8, "seq_len": 512, "global_batch_tokens": 512 * 64, "finetune": "lora"}


def plans(model: str = "llama-3.1-8b", **workload):
    work = Workload(model=model, **{**SMALL_JOB, **workload})
    return recommend(work, Goal("cheapest"), catalog_from_seed(), SearchOptions(top_n=3)).plans


def test_a_dora_plan_carries_it_costs_more_and_re_estimates_to_its_numbers(catalog):
    dora = plans(use_dora=True)
    assert dora and all(dict(p.training_regime).get("use_dora") is True for p in dora)
    assert all(p.tp == 1 for p in dora)  # PEFT's tensor-parallel LoRA layer refuses DoRA
    assert "use_dora" not in dict(plans()[0].training_regime)
    data = json.loads(json.dumps(dora[0].to_dict()))
    again = estimate_stored_plan(data)
    assert again.per_gpu.total == data["per_gpu_total_bytes"]
    assert again.compute.step_seconds == pytest.approx(data["step_seconds"], abs=1e-4)  # stored rounded
    regime = data["estimator_regime"]
    plain = {**regime, "training": {k: v for k, v in regime["training"].items() if k != "use_dora"}}
    lora = estimate_stored_plan({**data, "estimator_regime": plain})
    assert lora.params.trainable < again.params.trainable  # a magnitude per adapted output
    assert lora.per_gpu.total <= again.per_gpu.total  # (its peak may be the loss's, not a layer's)
    assert lora.compute.step_seconds < again.compute.step_seconds


def test_adapters_json_renders_use_dora_only_for_a_plan_sized_with_it():
    def rendered(regime: dict) -> dict:
        plan = {"finetune": "lora", "sharding": "fsdp-full-shard", "estimator_regime": {"training": regime}}
        return adapters_config(stack_inputs("fsdp", **plan))["lora"]

    sized = dict(plans(use_dora=True)[0].training_regime)
    dora, lora = rendered({"use_dora": True, "lora_dropout": 0.05}), rendered({"lora_dropout": 0.05})
    assert sized["use_dora"] is True and dora["use_dora"] is True
    assert "use_dora" not in lora
    assert {k: v for k, v in dora.items() if k != "use_dora"} == lora
    with pytest.raises(ValueError, match="estimator_regime.training.use_dora has the wrong type"):
        rendered({"use_dora": "yes"})


@pytest.mark.parametrize(("workload", "text"), [
    ({"finetune": "qlora"}, "PEFT's DoRA on LoRA adapters: it needs finetune='lora', not 'qlora'"),
    ({"finetune": "full"}, "it needs finetune='lora', not 'full'"),
    ({"use_dora": "yes"}, "use_dora must be true or false"),
])
def test_dora_outside_lora_is_refused_in_words(workload, text):
    with pytest.raises(ValueError, match=text):
        Workload(model="llama-3.1-8b", **{**SMALL_JOB, "use_dora": True, **workload})


def test_dora_on_a_model_or_a_layout_it_is_not_modelled_for_says_so():
    with pytest.raises(ValueError, match="modelled on the dense llama family's linears"):
        plans("mixtral-8x7b", use_dora=True)
    work = Workload(model="llama-3.1-8b", use_dora=True, **SMALL_JOB)
    with pytest.raises(ValueError, match="DoRA runs at tensor parallel 1 only"):
        recommend(work, Goal("cheapest"), catalog_from_seed(), SearchOptions(tp_sizes=(2,)))


def test_the_wizard_box_reaches_the_plan_and_the_link_back(client, catalog):
    html = client.post("/sizing/", inputs(finetune="lora", use_dora="on", lora_rank=64,
                                          go="results")).content.decode()
    plan = plan_unsign(_first_token(html))
    assert plan["estimator_regime"]["training"]["use_dora"] is True
    assert plan["workload"]["use_dora"] is True and plan["lora_rank"] == plan["workload"]["lora_rank"] == 64
    configured = client.get("/configure/", {"plan": _first_token(html)}).content.decode()
    assert "lora + DoRA" in configured
    back = configured.split('class="btn" href="')[1].split('"')[0].replace("&amp;", "&")
    assert "use_dora=on" in back and "lora_rank=64" in back
    again = plan_unsign(_first_token(client.get(back).content.decode()))
    assert again["estimator_regime"]["training"]["use_dora"] is True and again["lora_rank"] == 64


def test_the_wizard_box_does_nothing_for_other_methods(client, catalog):
    """Hidden unless LoRA is chosen: a box left ticked while QLoRA is chosen is not DoRA."""
    html = client.post("/sizing/", inputs(finetune="qlora", use_dora="on", go="results")).content.decode()
    plan = plan_unsign(_first_token(html))
    assert "use_dora" not in plan["estimator_regime"]["training"]
    assert "use_dora" not in plan["workload"]


def test_the_wizard_names_a_model_or_a_layout_dora_is_not_modelled_for(client, catalog):
    html = client.post("/sizing/", inputs(preset="mixtral-8x7b", finetune="lora", use_dora="on",
                                          go="results")).content.decode()
    assert "modelled on the dense llama family" in html
    html = client.post("/sizing/", inputs(finetune="lora", use_dora="on", tp=2, go="results"))
    errors = html.content.decode().split('id="err-tp"')[1].split("</div>")[0]
    assert "DoRA runs at tensor parallel 1 only" in errors
