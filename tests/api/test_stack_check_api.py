"""The API refuses a training stack that cannot run the plan, with the reason (quotes and orders)."""

import pytest

from portal.catalog.models import StackOption
from portal.orders.models import Order
from portal.quotes.models import Quote
from tests.api.conftest import assert_problem, key_client
from tests.factories import make_quote

TP_PLAN = {"model": "llama-3.1-70b", "sku": "8x-h100-sxm-80gb", "nodes": 2, "strategy": "fsdp",
           "sharding": "fsdp-full-shard", "offload": "none", "tp": 4, "pp": 1, "finetune": "full",
           "precision": "bf16-mixed", "stack": "torchtitan"}
CONFIG = {"sku": "8x-h100-sxm-80gb", "node_count": 2, "network": "ib-ndr-400g", "plan": TP_PLAN}
REASON = ("DeepSpeed (ZeRO stage 1–3) cannot run FSDP2 full shard and tensor parallelism 4 of this plan: "
          "choose torchtitan (FSDP2 + TP + PP + CP).")


@pytest.fixture
def acme_api(people, catalog):
    return key_client(people.acme)


def test_a_quote_with_a_stack_that_cannot_run_its_plan_is_a_400_on_strategy(acme_api):
    response = acme_api.post("/api/v1/quotes", CONFIG | {"strategy": "deepspeed"}, format="json")
    assert assert_problem(response, 400)["errors"] == {"strategy": [REASON]}
    assert not Quote.objects.exists()


def test_a_stack_that_can_run_it_is_quoted(acme_api):
    response = acme_api.post("/api/v1/quotes", CONFIG | {"strategy": "torchtitan"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["strategy"] == "torchtitan"
    no_stack = acme_api.post("/api/v1/quotes", CONFIG, format="json")  # "decide later" stays allowed
    assert no_stack.status_code == 201, no_stack.content


def test_an_inline_order_is_refused_on_its_configuration_s_strategy(acme_api):
    response = acme_api.post("/api/v1/orders", {"configuration": CONFIG | {"strategy": "ddp"}}, format="json")
    errors = assert_problem(response, 400)["errors"]
    assert errors["configuration"]["strategy"][0].startswith(
        "PyTorch DDP (torchrun) cannot run FSDP2 full shard and tensor parallelism 4")
    assert not Order.objects.exists() and not Quote.objects.exists()


def test_a_quote_stored_before_the_check_cannot_be_ordered_with_a_stack_that_cannot_run_it(people,
                                                                                           acme_api):
    quote = make_quote(people.acme, sku="8x-h100-sxm-80gb", node_count=2, network="ib-ndr-400g",
                       plan=TP_PLAN)  # the factory writes strategy=fsdp (Accelerate: no TP)
    response = acme_api.post("/api/v1/orders", {"quote": quote.reference}, format="json")
    errors = assert_problem(response, 400)["errors"]
    assert errors["quote"] == ["PyTorch FSDP2 (Accelerate) cannot run tensor parallelism 4 of this plan: "
                               "choose torchtitan (FSDP2 + TP + PP + CP)."]
    assert not Order.objects.exists()
    quote.strategy = StackOption.objects.get(slug="torchtitan")
    quote.save()
    assert acme_api.post("/api/v1/orders", {"quote": quote.reference}, format="json").status_code == 201
