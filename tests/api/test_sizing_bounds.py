"""Every numeric input of the sizing endpoints has bounds that say what is allowed; out of range
is a 400 that names the field and the bound, never a 500 (issue 28: `lora_rank: 10**30` was a
decimal.InvalidOperation in the pricing). The bounds are the sizing layer's own
(portal.sizing.estimator.config.LIMITS), which also refuses them with a ValueError."""

import json
from decimal import Decimal

import pytest
from rest_framework import serializers

from portal.api.v1 import serializers as s
from portal.catalog.pricing import money
from portal.sizing.estimator.config import LIMITS, TrainingConfig
from portal.sizing.recommend.types import Goal, Workload
from tests.api.conftest import assert_problem, key_client

NUMBERS = (serializers.IntegerField, serializers.FloatField, serializers.DecimalField)


def numeric_fields(serializer, prefix=""):
    """(dotted path, field) of every numeric input field, nested serializers and lists too."""
    for name, field in serializer.fields.items():
        if field.read_only:
            continue
        path = f"{prefix}{name}"
        if isinstance(field, serializers.ListField):
            field = field.child
        if isinstance(field, serializers.Serializer):
            yield from numeric_fields(field, f"{path}.")
        elif isinstance(field, NUMBERS):
            yield path, field


INPUTS = {"estimates": s.EstimateInputSerializer(), "recommendations": s.RecommendationInputSerializer(),
          "quotes": s.QuoteInputSerializer()}
FIELDS = [(endpoint, path, field) for endpoint, serializer in INPUTS.items()
          for path, field in numeric_fields(serializer)]
FIELDS += [("recommendations", f"goal.{path}", field)
           for path, field in numeric_fields(s.GoalInputSerializer())]


def test_every_numeric_input_has_both_bounds():
    unbounded = [f"{endpoint}: {path}" for endpoint, path, field in FIELDS
                 if field.min_value is None or field.max_value is None]
    assert not unbounded, unbounded
    assert len(FIELDS) >= 25


def _body(endpoint: str, path: str, value) -> dict:
    body = {"estimates": {"model": "llama-3.1-8b", "sku": "8x-h100-sxm-80gb"},
            "recommendations": {"model": "llama-3.1-8b", "finetune": "lora"},
            "quotes": {"sku": "1x-l4-24gb"}}[endpoint]
    *parents, leaf = path.split(".")
    node = body
    for parent in parents:
        node = node.setdefault(parent, {})
    if parents == ["goal"]:
        node["kind"] = "deadline" if leaf == "deadline_hours" else "budget"
    list_fields = {"node_counts", "tp_sizes", "pp_sizes"}
    node[leaf] = [value] if leaf in list_fields else value
    return body


@pytest.mark.parametrize(("endpoint", "path", "field"), FIELDS, ids=[f"{e}-{p}" for e, p, _ in FIELDS])
@pytest.mark.parametrize("beyond", ["above", "below", "huge"])
def test_out_of_range_is_a_400_naming_the_field_and_the_bound(catalog, people, endpoint, path, field,
                                                              beyond):
    above = field.max_value + 1 if isinstance(field, serializers.IntegerField) else field.max_value * 1.5
    value = {"above": above, "below": field.min_value - 1, "huge": 10**30}[beyond]
    response = key_client(people.reseller).post(f"/api/v1/{endpoint}", _body(endpoint, path, value),
                                                format="json")
    problem = assert_problem(response, 400)
    assert path in problem["detail"], problem
    errors = problem["errors"]
    for part in path.split("."):
        errors = errors[part]
    text = str(errors)
    bound = field.max_value if beyond != "below" else field.min_value
    assert f"{bound}" in text or f"{bound:,}" in text, text


def test_the_issues_request_is_a_400_on_lora_rank(catalog, people):
    response = key_client(people.reseller).post(
        "/api/v1/recommendations", {"model": "llama-3.1-8b", "finetune": "lora", "lora_rank": 10**30},
        format="json")
    problem = assert_problem(response, 400)
    assert problem["errors"]["lora_rank"] == ["Ensure this value is less than or equal to 65536."]


def test_the_sizing_layer_refuses_out_of_range_values_itself():
    with pytest.raises(ValueError, match="lora_rank must be a whole number from 1 to 65,536"):
        TrainingConfig(finetune="lora", lora_rank=10**30)
    with pytest.raises(ValueError, match="lora_rank must be a whole number from 1 to 65,536"):
        Workload(model="llama-3.1-8b", dataset_tokens=10**9, finetune="lora", lora_rank=10**30)
    with pytest.raises(ValueError, match="dataset_files must be a whole number from 1 to"):
        Workload(model="llama-3.1-8b", dataset_tokens=10**9, dataset_files=10**30)
    with pytest.raises(ValueError, match="epochs must be a number from 0 to 1,000"):
        Workload(model="llama-3.1-8b", dataset_tokens=10**9, epochs=1e308)
    with pytest.raises(ValueError, match="budget_usd must be a number from 0 to"):
        Goal(kind="budget", budget_usd=float("inf"))
    assert set(LIMITS) >= {"micro_batch", "seq_len", "grad_accum", "lora_rank", "dp", "tp", "pp", "ep"}


def test_a_price_out_of_range_is_a_value_error_not_invalid_operation():
    assert money(Decimal("12.345")) == Decimal("12.35")
    for amount in (10**30, float("inf"), float("nan"), Decimal("1e40")):
        with pytest.raises(ValueError, match="out of range"):
            money(amount)


def test_the_wizard_bounds_what_it_did_not(client, catalog):
    from portal.sizing.forms import WizardForm

    data = {name: field.initial for name, field in WizardForm.base_fields.items()
            if field.initial is not None}
    form = WizardForm(data | {"dataset_files": 10**30, "goal": "budget", "budget_usd": 1e308})
    assert not form.is_valid()
    assert "dataset_files" in form.errors and "budget_usd" in form.errors


def test_a_budget_is_money_as_written_from_the_wizard_and_the_api(catalog):
    """The budget is read as a Decimal, never through a float: the goal gets the cents written,
    the stored inputs the same amount, and the wizard says so for sub-cent digits."""
    from portal.sizing.forms import WizardForm

    data = {name: field.initial for name, field in WizardForm.base_fields.items()
            if field.initial is not None} | {"goal": "budget"}
    form = WizardForm(data | {"budget_usd": "1234.56"})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["budget_usd"] == Decimal("1234.56")
    assert form.goal_spec().budget_usd == Decimal("1234.56")
    assert json.loads(json.dumps(form.summary()))["budget_usd"] == 1234.56
    assert WizardForm(data | {"budget_usd": "10.005"}).errors["budget_usd"]
    goal = s.GoalInputSerializer(data={"kind": "budget", "budget_usd": 1234.56})
    assert goal.is_valid(), goal.errors
    assert goal.validated_data["budget_usd"] == Decimal("1234.56")
    assert isinstance(goal.validated_data["budget_usd"], Decimal)
