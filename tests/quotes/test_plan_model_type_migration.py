"""Plans stored before model_spec carried model_type get it once, by the rules the stacks read
off names then (quotes 0004, orders 0009): afterwards nothing guesses the architecture."""

import importlib

from django.apps import apps

from portal.orders.models import Order
from portal.quotes.models import Quote
from tests.factories import make_order, make_quote

MIGRATION = importlib.import_module("portal.quotes.migrations.0004_plan_model_type")
LLAMA = {"family": "llama", "num_experts": 0, "qkv_bias": False, "o_bias": False}


def _plan(model: str, **spec) -> dict:
    return {"model": model, "model_spec": {**LLAMA, **spec}, "schema_version": 1}


def test_stored_plans_get_the_model_type_the_old_name_rules_gave(catalog, people):
    cases = {"mistralai/Mistral-7B-Instruct-v0.2": (_plan("mistralai/Mistral-7B-Instruct-v0.2"), "mistral"),
             "mistral": (_plan("mistral"), "mistral"),
             "acme/llama-ish": (_plan("acme/llama-ish"), "llama"),
             "acme/moe": (_plan("acme/moe", num_experts=8), "mixtral"),
             "acme/qwen": (_plan("acme/qwen", qkv_bias=True), "qwen2"),
             "acme/gpt": (_plan("acme/gpt", family="gpt2"), "gpt2"),
             "kept": (_plan("mistral-x", model_type="llama"), "llama")}
    quotes, orders = {}, {}
    for name, (plan, _) in cases.items():
        quotes[name] = make_quote(people.acme).pk
        orders[name] = make_order(people.acme).pk
        Quote.objects.filter(pk=quotes[name]).update(plan=plan)
        Order.objects.filter(pk=orders[name]).update(plan=plan)
    empty = make_quote(people.acme)
    Quote.objects.filter(pk=empty.pk).update(plan={})
    MIGRATION.fill("quotes.Quote")(apps, None)
    MIGRATION.fill("orders.Order")(apps, None)
    for name, (plan, expected) in cases.items():
        for model, pk in ((Quote, quotes[name]), (Order, orders[name])):
            stored = model.objects.get(pk=pk).plan
            assert stored["model_spec"]["model_type"] == expected, (model.__name__, name)
            assert {k: v for k, v in stored["model_spec"].items() if k != "model_type"} == {
                k: v for k, v in plan["model_spec"].items() if k != "model_type"}
    assert Quote.objects.get(pk=empty.pk).plan == {}
