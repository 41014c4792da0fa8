"""An order that names no training stack runs DDP as the seed declares and installs it: what the
plan asks is checked against that, in words, and no database is read (the renderers run
without Django in bench/stack_gpu.py)."""

import pytest

from provisioning.stack.inputs import stack_inputs

from .variants import node, order

ZERO3 = {"model": "mistral-7b", "micro_batch": 2, "grad_accum": 16, "sharding": "zero3", "offload": "none",
         "checkpointing": "full", "precision": "bf16-mixed"}


def _no_stack(plan: dict):
    o = order("ddp", plan=plan)
    o.strategy = None
    return o


def test_an_order_without_a_stack_runs_ddp_and_what_ddp_cannot_run_is_refused_in_words():
    assert stack_inputs(order=_no_stack({}), node=node(1), nodes=[node(1)]).strategy == "ddp"
    with pytest.raises(ValueError, match=r"DDP \(torchrun\) cannot run ZeRO-3"):
        stack_inputs(order=_no_stack(ZERO3), node=node(1), nodes=[node(1)])
