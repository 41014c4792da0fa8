"""The acceptance step around its node scripts: a cluster waits (transiently) for every node's
stack; the memory probe is the plan's own layout at reduced depth with the estimator's figure;
marker lines that are not the promised JSON fail with a clear reason."""

import json

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator import model_from_hf_config
from portal.sizing.recommend import Goal, SearchOptions, Workload, recommend
from provisioning import runs
from provisioning.acceptance.probe import PROBE_LAYERS, memory_probe
from provisioning.acceptance.report import JOB_MARKER, ReportUnreadable, find_marker
from provisioning.models import StepRun
from provisioning.pipeline import engine
from provisioning.states import StepStatus
from tests.factories import H100_SKU, approved_order, make_node

LLAMA = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048, "num_hidden_layers": 16,
         "num_attention_heads": 16, "num_key_value_heads": 8, "intermediate_size": 5632,
         "max_position_embeddings": 4096}


def test_a_cluster_waits_for_every_stack_before_its_training_job(catalog, people, sim_dir):
    first, second = (make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="f1") for _ in range(2))
    run = approved_order(people, node_count=2).runs.get()
    runs.run_start(run_id=run.pk)
    for step in ("reserve", "deploy_os", "configure", "storage", "stack", "access"):
        assert engine.step_execute(run_id=run.pk, node_id=first.pk, step=step).status == "succeeded"

    waiting = engine.step_execute(run_id=run.pk, node_id=first.pk, step="acceptance")

    assert waiting.status == "retry" and waiting.retry_in_s > 0
    assert f"waiting for the training stack on {second.hostname}" in waiting.message
    for step in ("reserve", "deploy_os", "configure", "storage", "stack", "access"):
        engine.step_execute(run_id=run.pk, node_id=second.pk, step=step)
    StepRun.objects.filter(run=run, step="acceptance").update(retry_at=None)  # backoff elapsed
    assert engine.step_execute(run_id=run.pk, node_id=first.pk, step="acceptance").status == "succeeded"
    report = StepRun.objects.get(run=run, node=first, step="acceptance").result["report"]
    assert report["passed"] and report["nodes"] == 2 and report["ddp_losses"]
    # The second node's own step runs its node checks; the job ran from the first.
    assert engine.step_execute(run_id=run.pk, node_id=second.pk, step="acceptance").status == "succeeded"
    other = StepRun.objects.get(run=run, node=second, step="acceptance")
    assert other.status == StepStatus.SUCCEEDED
    job = next(c for c in other.result["report"]["checks"] if c["name"] == "training job")
    assert job["status"] == "skip" and first.hostname in job["detail"]


def test_the_memory_probe_is_the_plans_layout_at_reduced_depth():
    work = Workload(model=model_from_hf_config(LLAMA), dataset_tokens=10**8, seq_len=1024,
                    global_batch_tokens=1024 * 64)
    plan = recommend(work, Goal("cheapest"), catalog_from_seed(), SearchOptions(top_n=1)).plans[0]
    probe_json, why = memory_probe(json.loads(json.dumps(plan.to_dict())))
    assert why == ""
    probe = json.loads(probe_json)
    shape = (probe["layers"], probe["hidden"], probe["kv_heads"], probe["seq"])
    assert shape == (PROBE_LAYERS, 2048, 8, 1024)
    assert probe["micro_batch"] == plan.micro_batch
    # What the allocator holds is the estimate less what lives outside it (context, NCCL).
    assert 0 < probe["estimate_bytes"] < probe["estimate_total_bytes"]


def test_without_a_readable_plan_the_probe_is_skipped_with_the_reason():
    assert memory_probe(None) == ("", "the order carries no sizing plan")
    probe, why = memory_probe({"model": "llama-3.1-8b"})  # an unversioned plan
    assert probe == "" and why.startswith("the order's plan cannot be re-estimated")


@pytest.mark.parametrize("line, message", [
    (f"{JOB_MARKER} {{not json", "line is not JSON"),
    (f"{JOB_MARKER} [1, 2]", "holds list, not an object"),
])
def test_a_marker_that_is_not_a_json_object_is_refused(line, message):
    with pytest.raises(ReportUnreadable, match=message):
        find_marker(["some output", line], JOB_MARKER)


def test_no_marker_is_none_and_the_last_one_wins():
    assert find_marker(["x", "y"], JOB_MARKER) is None
    assert find_marker([f"{JOB_MARKER} {{\"a\": 1}}", f"{JOB_MARKER} {{\"a\": 2}}"], JOB_MARKER) == {"a": 2}
