"""The sizing wizard (/sizing/): steps, live results, models from presets, uploads and the Hub."""

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from portal.sizing.forms import WizardForm
from portal.sizing.plan_tokens import plan_unsign

LLAMA_CONFIG = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048, "num_hidden_layers": 16,
                "num_attention_heads": 16, "num_key_value_heads": 8, "intermediate_size": 5632,
                "max_position_embeddings": 4096, "_name_or_path": "acme/tiny-llama"}


def inputs(**overrides):
    """What the browser posts: every field's default (hidden on other steps), plus changes."""
    fields = WizardForm.base_fields.items()
    data = {name: field.initial for name, field in fields if field.initial is not None}
    return {k: v for k, v in (data | overrides).items() if v is not None}


def test_it_starts_at_the_model_step_for_anyone(client, catalog):
    html = client.get("/sizing/").content.decode()
    assert "1. Model" in html and 'value="llama-3.1-8b"' in html
    assert '<datalist id="preset-list">' in html and 'value="mistral-7b"' in html
    assert "Next: training setup" in html and "Show plans now" in html


def test_next_shows_the_training_step_and_carries_the_model(client, catalog):
    html = client.post("/sizing/", inputs(go="training")).content.decode()
    assert "2. Training setup" in html
    assert '<input type="hidden" name="preset" value="llama-3.1-8b"' in html
    assert "Advanced: optimizer and parallel layout" in html


@pytest.mark.parametrize("step", ["data", "goal"])
def test_each_step_renders(client, catalog, step):
    html = client.post("/sizing/", inputs(go=step)).content.decode()
    assert {"data": "3. Data", "goal": "4. Goal"}[step] in html


def test_two_clicks_give_ranked_plans_and_both_charts(client, catalog):
    response = client.post("/sizing/", inputs(go="results"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Recommended for llama-3.1-8b" in html
    assert html.count('class="plan-card') == 5
    assert 'id="memory-chart"' in html and 'id="cost-chart"' in html
    assert "Configure this server" in html
    assert "Why not a smaller server?" in html


def test_the_checkpoint_archive_says_how_many_checkpoints_the_bucket_keeps(client, catalog, settings):
    settings.STORAGE_KEEP_VERSIONS = 2
    html = client.post("/sizing/", inputs(go="results")).content.decode()
    assert re.search(r"the last 2 full checkpoints of [0-9.,]+ GB each", html), html


def test_htmx_gets_partials_without_a_page(client, catalog):
    step = client.post("/sizing/", inputs(go="data"), HTTP_HX_REQUEST="true").content.decode()
    assert step.startswith('<div id="wizard">') and "<html" not in step
    results = post(client, "/sizing/results/", HTTP_HX_REQUEST="true", finetune="lora")
    assert results.startswith('<section id="results"') and "<html" not in results
    assert 'id="err-preset" class="field-errors" hx-swap-oob="true"' in results


def test_results_follow_the_inputs(client, catalog):
    cheapest = client.post("/sizing/results/", inputs(), HTTP_HX_REQUEST="true").content.decode()
    lora = client.post("/sizing/results/", inputs(finetune="qlora"), HTTP_HX_REQUEST="true").content.decode()
    assert cheapest != lora
    assert "qlora" in plan_unsign(_first_token(lora))["finetune"]


def test_results_without_javascript_are_a_full_page(client, catalog):
    html = client.post("/sizing/results/", inputs(goal="fastest")).content.decode()
    assert "<html" in html and "Update plans" in html and "Recommended for" in html


def test_a_link_with_parameters_shows_results(client, catalog):
    html = client.get("/sizing/", {"preset": "mistral-7b", "finetune": "lora"}).content.decode()
    assert "Recommended for mistral-7b" in html


def test_configure_this_server_carries_a_signed_plan(client, catalog):
    html = client.post("/sizing/", inputs(go="results")).content.decode()
    plan = plan_unsign(_first_token(html))
    assert plan["model"] == "llama-3.1-8b" and plan["rank"] == 1
    assert plan["workload"]["dataset_tokens"] == 500_000_000
    configured = client.get("/configure/", {"plan": _first_token(html)}).content.decode()
    assert f'value="{plan["sku"]}" selected' in configured
    assert "From your sizing" in configured
    back = configured.split('class="btn" href="')[1].split('"')[0].replace("&amp;", "&")
    assert back.startswith("/sizing/?preset=llama-3.1-8b")
    assert "Recommended for llama-3.1-8b" in client.get(back).content.decode()


def test_unknown_model_is_an_inline_error_on_the_model_step(client, catalog):
    html = client.post("/sizing/", inputs(preset="gpt-17", go="results")).content.decode()
    assert "1. Model" in html
    assert "Unknown model &#x27;gpt-17&#x27;" in html
    assert 'class="plan-card' not in html


def test_malformed_config_json_is_an_inline_error(client, catalog):
    upload = SimpleUploadedFile("config.json", b'{"model_type": "llama", ', content_type="application/json")
    html = post(client, model_source="upload", config_file=upload, go="training")
    assert "1. Model" in html and "not valid JSON" in html


def test_config_json_of_an_unknown_architecture_is_an_inline_error(client, catalog):
    upload = SimpleUploadedFile("config.json", json.dumps({"model_type": "t5"}).encode())
    html = post(client, model_source="upload", config_file=upload, go="results")
    assert "unsupported model_type &#x27;t5&#x27;" in html


def test_an_uploaded_config_json_is_sized_and_carried_between_steps(client, catalog):
    upload = SimpleUploadedFile("config.json", json.dumps(LLAMA_CONFIG).encode())
    step2 = client.post("/sizing/", inputs(model_source="upload", config_file=upload, go="training"))
    html = step2.content.decode()
    assert "2. Training setup" in html
    token = html.split('name="model_config" value="')[1].split('"')[0]
    results = client.post("/sizing/", inputs(model_source="upload", model_config=token, go="results"))
    assert "Recommended for acme/tiny-llama" in results.content.decode()


def test_upload_without_a_file_says_so(client, catalog):
    html = client.post("/sizing/", inputs(model_source="upload", go="training")).content.decode()
    assert "Choose the model&#x27;s config.json to upload." in html


def test_hugging_face_offline_is_a_clear_inline_message(client, catalog, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens: offline
    html = client.post("/sizing/", inputs(model_source="hf", hf_model_id="acme/unseen-model",
                                          go="results")).content.decode()
    assert "1. Model" in html
    assert "Hugging Face cannot be reached from this server" in html
    assert "Upload the model&#x27;s config.json instead" in html


def test_a_malformed_hugging_face_id_is_refused(client, catalog):
    html = client.post("/sizing/", inputs(model_source="hf", hf_model_id="not an id",
                                          go="training")).content.decode()
    assert "looks like organisation/name" in html


def test_an_impossible_parallel_layout_is_an_inline_error(client, catalog):
    html = client.post("/sizing/", inputs(preset="qwen2.5-7b", tp="8", go="results")).content.decode()
    assert "2. Training setup" in html
    assert "Tensor parallel 8 does not divide the model&#x27;s 28 attention heads" in html
    html = post(client, preset="bert-base", seq_len="512", pp="16", go="results")
    assert "16 pipeline stages are more than the model&#x27;s 12 layers" in html


def test_a_sequence_beyond_learned_positions_is_an_inline_error(client, catalog):
    html = client.post("/sizing/", inputs(preset="gpt2-124m", go="results")).content.decode()
    assert "has 1024 learned positions" in html


@pytest.mark.parametrize(("overrides", "text"), [
    ({"dataset_tokens": "lots"}, "Enter a number of tokens such as 500M"),
    ({"seq_len": "0"}, "Ensure this value is greater than or equal to 128."),
    ({"goal": "deadline", "deadline_hours": ""}, "Give the deadline in hours."),
    ({"goal": "budget", "budget_usd": ""}, "Give the budget in USD."),
    ({"epochs": "0"}, "Train for more than 0 epochs"),
    ({"dataset_gb": "1e300"}, "Ensure this value is less than or equal to"),  # was int(inf): a 500
    ({"dataset_tokens": "1E308", "epochs": "2"}, "Enter at most 1e+18 tokens."),  # a 500 too
    ({"dataset_tokens": "1E18", "epochs": "1000"}, "more than 1e+18 tokens to train"),
])
def test_bad_numbers_are_inline_errors(client, catalog, overrides, text):
    response = client.post("/sizing/", inputs(go="results", **overrides))
    assert response.status_code == 200
    assert text in response.content.decode()


def test_when_nothing_fits_the_results_say_why(client, catalog):
    html = post(client, preset="llama-3.1-405b", max_nodes="1", go="results")
    assert "No server fits yet" in html
    assert "no server in the catalog fits llama-3.1-405b" in html.lower()


def post(client, url="/sizing/", *, HTTP_HX_REQUEST=None, **overrides) -> str:
    headers = {"HTTP_HX_REQUEST": HTTP_HX_REQUEST} if HTTP_HX_REQUEST else {}
    return client.post(url, inputs(**overrides), **headers).content.decode()


def _first_token(html: str) -> str:
    return html.split('name="plan" value="')[1].split('"')[0]


def test_a_qwen3_config_json_is_sized_through_the_wizard(client, catalog):
    config = {"model_type": "qwen3", "_name_or_path": "Qwen/Qwen3-0.6B", "vocab_size": 151936,
              "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
              "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
              "max_position_embeddings": 40960, "attention_bias": False, "tie_word_embeddings": True}
    upload = SimpleUploadedFile("config.json", json.dumps(config).encode())
    step2 = client.post("/sizing/", inputs(model_source="upload", config_file=upload, go="training"))
    token = step2.content.decode().split('name="model_config" value="')[1].split('"')[0]
    results = client.post("/sizing/", inputs(model_source="upload", model_config=token, go="results"))
    html = results.content.decode()
    assert "Recommended for Qwen/Qwen3-0.6B" in html and 'class="plan-card' in html
