"""A Hugging Face id of a model we ship as a preset needs no download: it sizes offline (the help
text's example included); a config.json without model_type says so in words."""

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from portal.sizing import services
from portal.sizing.estimator import get_preset
from portal.sizing.forms import WizardForm
from tests.sizing.test_views_wizard import LLAMA_CONFIG, inputs


@pytest.fixture
def offline(monkeypatch):
    """Hugging Face unreachable, and any download attempt fails the test."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(services, "_hf_download", lambda repo_id: pytest.fail(f"downloaded {repo_id}"))


@pytest.mark.parametrize(("repo_id", "preset"), [
    ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"), ("mistralai/Mistral-7B-v0.1", "mistral-7b"),
    ("MISTRALAI/mistral-7b-v0.1", "mistral-7b"), ("Qwen/Qwen2.5-72B", "qwen2.5-72b")])
def test_a_hub_id_of_a_preset_loads_the_preset_without_a_download(offline, repo_id, preset):
    loaded = services.model_from_hf(repo_id)
    assert loaded.spec.params.total == get_preset(preset).params.total
    assert loaded.label == repo_id


def test_the_help_texts_example_sizes_offline(client, catalog, offline):
    example = re.search(r"e\.g\. (\S+?)\.? ", WizardForm.base_fields["hf_model_id"].help_text).group(1)
    assert example == "mistralai/Mistral-7B-v0.1"
    html = client.post("/sizing/", inputs(model_source="hf", hf_model_id=example,
                                          go="results")).content.decode()
    assert f"Recommended for {example}" in html


def test_an_unknown_hub_id_offline_still_says_so(client, catalog, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    html = client.post("/sizing/", inputs(model_source="hf", hf_model_id="acme/unseen-model",
                                          go="results")).content.decode()
    assert "Hugging Face cannot be reached from this server" in html


@pytest.mark.parametrize("model_type", [None, "", 7])
def test_a_config_without_model_type_says_so_in_words(client, catalog, model_type):
    config = {k: v for k, v in LLAMA_CONFIG.items() if k != "model_type"}
    if model_type is not None:
        config["model_type"] = model_type
    upload = SimpleUploadedFile("config.json", json.dumps(config).encode(),
                                content_type="application/json")
    html = client.post("/sizing/", inputs(model_source="upload", config_file=upload,
                                          go="training")).content.decode()
    assert "does not say which architecture it is: it has no &quot;model_type&quot;" in html
    assert "unsupported model_type None" not in html
