"""Every plan the recommender ranks, for every preset and goal, renders its stack's files: the
plan's values reach the configs, and no plan breaks a renderer."""

import json
from types import SimpleNamespace as NS

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator import list_presets
from portal.sizing.recommend import Goal, SearchOptions, Workload, recommend
from provisioning.stack.bundle import render_stack
from tests.provisioning.stack.variants import node, order

GOALS = (Goal("cheapest"), Goal("fastest"))


@pytest.fixture(scope="module")
def catalog():
    return catalog_from_seed()


@pytest.mark.parametrize("model", list_presets())
def test_every_recommended_plan_renders(catalog, model):
    work = Workload(model=model, dataset_tokens=10**8, seq_len=512, global_batch_tokens=512 * 64)
    rendered = 0
    for goal in GOALS:
        for plan in recommend(work, goal, catalog, SearchOptions(top_n=3)).plans:
            data = json.loads(json.dumps(plan.to_dict()))
            sku = NS(gpu_count=plan.gpus_per_node, gpu=NS(name=plan.gpu_name), cpu_cores=64,
                     interconnect="nvswitch")
            nodes = [node(i + 1) for i in range(plan.nodes)]
            stack = render_stack(order=order(plan.stack.slug, plan=data, sku=sku), node=nodes[-1],
                                 nodes=nodes)
            env = stack.file("env.sh").content
            assert f"export TRAINYARD_MICRO_BATCH={plan.micro_batch}\n" in env
            assert f"export TRAINYARD_GRAD_ACCUM={plan.grad_accum}\n" in env
            assert f"export WORLD_SIZE={plan.gpus}\n" in env
            # A whole plan defaults nothing but cp (the Plan has no context-parallel field yet).
            assert set(stack.inputs.training.defaulted) <= {"cp"}
            rendered += 1
    assert rendered
