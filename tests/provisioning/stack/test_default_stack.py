"""An order that names no training stack runs DDP: what it may run is checked against the
catalog's ddp stack as the operator keeps it in the database, not the seed file."""

import pytest

from portal.catalog.models import StackOption
from provisioning.stack.inputs import stack_inputs

from .variants import node, order

ZERO3 = {"model": "mistral-7b", "micro_batch": 2, "grad_accum": 16, "sharding": "zero3", "offload": "none",
         "checkpointing": "full", "precision": "bf16-mixed"}


def _no_stack(plan: dict):
    o = order("ddp", plan=plan)
    o.strategy = None
    return o


def test_an_order_without_a_stack_is_checked_against_the_catalogs_ddp_row(catalog):
    assert stack_inputs(order=_no_stack({}), node=node(1), nodes=[node(1)]).strategy == "ddp"
    with pytest.raises(ValueError, match=r"DDP \(torchrun\) cannot run ZeRO-3"):
        stack_inputs(order=_no_stack(ZERO3), node=node(1), nodes=[node(1)])
    StackOption.objects.filter(slug="ddp").update(data_parallel=["ddp", "zero3"])  # the operator's word
    assert stack_inputs(order=_no_stack(ZERO3), node=node(1), nodes=[node(1)]).strategy == "ddp"


def test_an_order_without_a_stack_and_a_catalog_without_ddp_is_refused_in_words(catalog):
    StackOption.objects.filter(slug="ddp").delete()
    with pytest.raises(ValueError, match="the catalog has no 'ddp' stack"):
        stack_inputs(order=_no_stack({}), node=node(1), nodes=[node(1)])
