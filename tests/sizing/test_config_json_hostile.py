"""A hostile config.json or Hugging Face id is a clear form error on the wizard and a 400 by
field in POST /api/v1/estimates: never a RecursionError, ValueError or OverflowError 500."""

import html
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from portal.accounts.services import api_key_issue
from tests.factories import OrganisationFactory
from tests.sizing.test_views_wizard import LLAMA_CONFIG, inputs

DEEP = "[" * 50_000 + "]" * 50_000
HOSTILE_CONFIGS = [
    (DEEP, "nests deeper than 16 levels"),
    ('{"model_type": "llama", "a": ' + "[" * 20 + "]" * 20 + "}", "nests deeper than 16 levels"),
    (json.dumps(LLAMA_CONFIG)[:-1] + ', "x": ' + "9" * 5000 + "}", "number of 5000 digits"),
    (json.dumps(LLAMA_CONFIG | {"hidden_size": 10**30}), "a number of 31 digits"),
    (json.dumps(LLAMA_CONFIG | {"hidden_size": 2048 * 10**6, "num_attention_heads": 16}),
     "hidden_size is 2,048,000,000"),
    (json.dumps(LLAMA_CONFIG | {"attention_dropout": 1e308}), "dropout must be a probability"),
    (json.dumps(LLAMA_CONFIG)[:-1] + ', "rope_theta": Infinity}', "contains Infinity"),
    (json.dumps({k: v for k, v in LLAMA_CONFIG.items() if k != "vocab_size"}), "has no vocab_size"),
    ('{"model_type": "llama", ', "not valid JSON"),
]


@pytest.mark.parametrize(("text", "message"), HOSTILE_CONFIGS)
def test_the_wizard_says_what_is_wrong_with_the_upload(catalog, text, message):
    upload = SimpleUploadedFile("config.json", text.encode(), content_type="application/json")
    client = Client(raise_request_exception=False)
    response = client.post("/sizing/", inputs(model_source="upload", config_file=upload, go="training"))
    assert response.status_code in (200, 400)
    assert message in html.unescape(response.content.decode())


def _api():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Api-Key " + api_key_issue(
        organisation=OrganisationFactory(), name="t").plaintext)
    return client


@pytest.mark.parametrize(("text", "message"), HOSTILE_CONFIGS[1:-1])
def test_the_estimates_api_says_it_on_hf_config(catalog, text, message):
    body = '{"hf_config": ' + text + "}"
    response = _api().post("/api/v1/estimates", body, content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert message in json.dumps(problem.get("errors", {}).get("hf_config", problem["detail"])) or \
        "JSON parse error" in problem["detail"]


def test_a_deeply_nested_or_oversized_api_body_is_a_json_400(catalog, settings):
    api = _api()
    deep = api.post("/api/v1/estimates", '{"hf_config": ' + DEEP + "}", content_type="application/json")
    big = api.post("/api/v1/estimates", json.dumps({"model": "x" * (settings.API_MAX_BODY_BYTES + 10)}),
                   content_type="application/json")
    for response in (deep, big):
        assert response.status_code == 400
        assert response["Content-Type"] == "application/problem+json"


def test_an_oversized_config_is_refused_before_it_is_read(catalog):
    upload = SimpleUploadedFile("config.json", b" " * (300 * 1024) + json.dumps(LLAMA_CONFIG).encode())
    response = Client().post("/sizing/", inputs(model_source="upload", config_file=upload, go="training"))
    assert "too large for a config.json (307" in response.content.decode()


def test_an_upload_past_the_upload_limit_is_a_400(catalog, settings):
    settings.UPLOAD_MAX_BYTES = 64 * 1024
    upload = SimpleUploadedFile("config.json", b"{" * (200 * 1024))
    response = Client(raise_request_exception=False).post(
        "/sizing/", inputs(model_source="upload", config_file=upload, go="training"))
    assert response.status_code == 400
    assert b"upload was too large" in response.content


@pytest.mark.parametrize("repo_id", ["a/..", "../../etc/passwd", "org/na me", "org/" + "x" * 200,
                                     "Zürich/model", "org/-name", "justaname"])
def test_an_invalid_hugging_face_id_says_what_an_id_looks_like(catalog, repo_id):
    response = Client(raise_request_exception=False).post(
        "/sizing/", inputs(model_source="hf", hf_model_id=repo_id, go="training"))
    assert response.status_code in (200, 400)
    text = html.unescape(response.content.decode())
    assert "is not a Hugging Face model id" in text or "at most 200 characters" in text
