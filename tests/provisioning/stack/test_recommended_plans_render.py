"""Every plan the recommender ranks, for every preset and goal, renders on its real SKU and
network, and the libraries' own parsers accept every rendered config: Accelerate's launch
command (and DeepSpeed's plugin through it), DeepSpeed's config class, torchtitan's JobConfig.
The plan's values reach the configs: the rendered global batch is the plan's."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from types import SimpleNamespace as NS

import pytest
import yaml

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator import list_presets
from portal.sizing.recommend import Goal, SearchOptions, Workload, recommend
from provisioning.stack.bundle import render_stack
from provisioning.stack.inputs import CHECKPOINT_EVERY_S, MIN_CHECKPOINTS
from tests.provisioning.stack.variants import STACKS, node

GOALS = (Goal("cheapest"), Goal("fastest"), Goal("deadline", deadline_hours=24 * 14),
         Goal("budget", budget_usd=20_000))
# Loads torchtitan's job config parser without its package __init__ (which imports triton, GPU
# only) and parses every file given: one line of JSON per file.
TITAN_PARSE = """
import importlib.util, json, sys, types
spec = importlib.util.find_spec("torchtitan")
package = types.ModuleType("torchtitan")
package.__path__ = list(spec.submodule_search_locations)
sys.modules["torchtitan"] = package
from torchtitan.config import ConfigManager
for path in sys.argv[1:]:
    c = ConfigManager().parse_args(["--job.config_file", path])
    print(json.dumps([c.model.name, c.model.flavor, c.training.global_batch_size,
                      c.training.local_batch_size, c.training.steps,
                      c.parallelism.tensor_parallel_degree, c.parallelism.pipeline_parallel_degree]))
"""


@pytest.fixture(scope="module")
def rendered():
    """(preset, goal, plan, stack) for every ranked plan."""
    catalog = catalog_from_seed()
    networks = {n.slug: n for n in catalog.networks}
    found = []
    for model in list_presets():
        work = Workload(model=model, dataset_tokens=10**8, seq_len=512, global_batch_tokens=512 * 64)
        for goal in GOALS:
            try:
                plans = recommend(work, goal, catalog, SearchOptions(top_n=3)).plans
            except ValueError as exc:  # nothing fits (405B at this batch): said so
                assert "no server in the catalog fits" in str(exc) or "no configuration" in str(exc)
                continue
            for plan in plans:
                sku = catalog.sku(plan.sku)
                network = networks[plan.network]
                order = NS(reference="O-PLAN0001", strategy=STACKS[plan.stack.slug],
                           tracker=NS(slug="tensorboard"), plan=json.loads(json.dumps(plan.to_dict())),
                           sku=NS(gpu_count=sku.gpus_per_node, gpu=NS(name=plan.gpu_name),
                                  cpu_cores=sku.cpu_cores, interconnect=sku.interconnect),
                           network=NS(kind=network.kind, speed_gbps=int(network.speed_gbit_per_s)),
                           storage_provider_id=None, has_object_storage=False)
                nodes = [node(i + 1) for i in range(plan.nodes)]
                found.append((model, goal.kind, plan,
                              render_stack(order=order, node=nodes[-1], nodes=nodes)))
    assert len({m for m, *_ in found}) >= len(list_presets()) - 1
    return found


def test_every_plan_checkpoints_at_least_three_times_about_every_45_minutes(rendered):
    """So a crash loses at most ~45 minutes and a run shorter than its first interval still leaves
    checkpoints for the sync timer to copy (torchtitan's interval; the other stacks' env.sh)."""
    for model, goal, plan, stack in rendered:
        training = stack.inputs.training
        every = training.checkpoint_every_steps
        assert training.train_steps // every >= MIN_CHECKPOINTS, (model, goal, every)
        assert every == 1 or every * plan.step_seconds <= CHECKPOINT_EVERY_S * 1.02, (model, goal)
        files = {f.name: f.content for f in stack.files}
        assert f"export TRAINYARD_CHECKPOINT_EVERY_STEPS={every}\n" in files["env.sh"]
        if "torchtitan.toml" in files:
            assert tomllib.loads(files["torchtitan.toml"])["checkpoint"]["interval"] == every


def test_every_plan_renders_its_batch_and_world(rendered):
    for model, goal, plan, stack in rendered:
        env = stack.file("env.sh").content
        assert f"export TRAINYARD_MICRO_BATCH={plan.micro_batch}\n" in env, (model, goal)
        assert f"export TRAINYARD_GRAD_ACCUM={plan.grad_accum}\n" in env, (model, goal)
        assert f"export WORLD_SIZE={plan.gpus}\n" in env, (model, goal)
        t = stack.inputs.training
        assert t.global_batch * t.seq_len == plan.global_batch_tokens, (model, goal)
        assert set(t.defaulted) <= {"cp"}  # the Plan has no context-parallel field


def test_accelerate_accepts_every_rendered_accelerate_config(rendered, tmp_path):
    pytest.importorskip("accelerate")
    from tests.provisioning.stack.test_renderers import accelerate_launch_args

    checked = 0
    for model, goal, plan, stack in rendered:
        file = stack.file("accelerate.yaml")
        if file is None:
            continue
        content = file.content
        if plan.stack.slug == "deepspeed":
            ds = tmp_path / f"ds-{checked}.json"
            ds.write_text(stack.file("deepspeed.json").content)
            content = content.replace("/etc/trainyard/deepspeed.json", str(ds))
        args = accelerate_launch_args(content, tmp_path)
        assert args.num_processes == plan.gpus and args.num_machines == plan.nodes, (model, goal)
        checked += 1
    assert checked


def test_deepspeed_accepts_every_rendered_deepspeed_config(rendered):
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig

    checked = 0
    for model, goal, plan, stack in rendered:
        if (file := stack.file("deepspeed.json")) is None:
            continue
        config = DeepSpeedConfig(json.loads(file.content))  # no process group here: world 1
        sequences = config.train_micro_batch_size_per_gpu * config.gradient_accumulation_steps * plan.dp
        assert sequences * plan.seq_len == plan.global_batch_tokens, (model, goal)
        checked += 1
    assert checked


def test_torchtitan_accepts_every_rendered_job_config(rendered, tmp_path):
    pytest.importorskip("tyro")
    import importlib.util

    if importlib.util.find_spec("torchtitan") is None:
        pytest.skip("torchtitan is not installed (the ml extra)")
    files = []
    for i, (_, _, plan, stack) in enumerate(rendered):
        if (file := stack.file("torchtitan.toml")) is not None:
            path = tmp_path / f"titan-{i}.toml"
            path.write_text(file.content)
            files.append((path, plan, tomllib.loads(file.content)))
    if not files:
        pytest.skip("no recommended plan ran on torchtitan at this workload")
    done = subprocess.run([sys.executable, "-c", TITAN_PARSE, *(str(p) for p, _, _ in files)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    parsed = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    assert len(parsed) == len(files)
    for (name, flavour, global_batch, _, _, tp, pp), (_, plan, data) in zip(parsed, files, strict=True):
        assert name == "llama3" and flavour == data["model"]["flavor"]
        assert (tp, pp) == (plan.tp, plan.pp)
        assert global_batch * plan.seq_len == plan.global_batch_tokens


def test_a_plan_for_another_world_is_refused_not_rendered_with_another_batch(rendered):
    """The same plan on an order with half the nodes: its numbers no longer add up."""
    multi = next(((p, s) for _, _, p, s in rendered if p.nodes > 1), None)
    if multi is None:
        pytest.skip("no multi-node plan at this workload")
    plan, stack = multi
    order = NS(reference="O-PLAN0002", strategy=STACKS[plan.stack.slug], tracker=None,
               plan=plan.to_dict(), sku=NS(gpu_count=plan.gpus_per_node, gpu=NS(name=plan.gpu_name),
                                          cpu_cores=64, interconnect="nvswitch"),
               network=NS(kind="infiniband", speed_gbps=400), storage_provider_id=None,
               has_object_storage=False)
    with pytest.raises(ValueError, match="sized for another layout|does not divide the order's 8 GPU"):
        render_stack(order=order, node=node(1), nodes=[node(1)])


def test_yaml_and_json_configs_are_well_formed(rendered):
    for _, _, _, stack in rendered:
        for file in stack.files:
            if file.kind == "yaml":
                yaml.safe_load(file.content)
            elif file.kind == "json":
                json.loads(file.content)
