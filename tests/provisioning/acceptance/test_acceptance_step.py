"""The acceptance step around its node scripts: a cluster's first node waits (without using up
its attempts, within its deadline) for every node's stack and every other node's own checks;
each node gets its own test-host flag; the memory probe is the plan's own layout at reduced
depth with the estimator's figure; marker lines that are not the promised JSON fail with a clear
reason; a diverged loss is stored (no NaN reaches PostgreSQL)."""

import json
import math
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator import model_from_hf_config
from portal.sizing.recommend import Goal, SearchOptions, Workload, recommend
from provisioning.acceptance.probe import PROBE_LAYERS, memory_probe
from provisioning.acceptance.report import (
    ERROR_MARKER,
    JOB_MARKER,
    AcceptanceReport,
    AcceptanceResult,
    ReportUnreadable,
    find_marker,
    job_fields,
)
from provisioning.acceptance.scripts import CHECKS_DIR, JOB_DIR, STACK_MISSING, job_script
from provisioning.drivers.simulated import SimulatedDriver
from provisioning.fulfilment.selectors import acceptance_report
from provisioning.models import StepRun
from provisioning.pipeline import engine, runs
from provisioning.states import StepStatus
from tests.factories import H100_SKU, approved_order, make_node

LLAMA = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048, "num_hidden_layers": 16,
         "num_attention_heads": 16, "num_key_value_heads": 8, "intermediate_size": 5632,
         "max_position_embeddings": 4096}
BEFORE_ACCEPTANCE = ("reserve", "deploy_os", "configure", "storage", "stack", "access")


def two_node_run(people, sim_dir, **second_options):
    first = make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="f1")
    second = make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="f1", **second_options)
    order = approved_order(people, node_count=2)
    run = order.runs.get()
    runs.run_start(run_id=run.pk)
    return order, run, first, second


def prepare(run, node, steps=BEFORE_ACCEPTANCE):
    for step in steps:
        assert engine.step_execute(run_id=run.pk, node_id=node.pk, step=step).status == "succeeded"


def look_again(run, node):
    """The wait's retry time taken as elapsed, as the task's countdown would."""
    StepRun.objects.filter(run=run, node=node, step="acceptance").update(retry_at=None)
    return engine.step_execute(run_id=run.pk, node_id=node.pk, step="acceptance")


def test_a_clusters_first_node_waits_for_the_others_without_using_up_its_attempts(
        catalog, people, sim_dir, settings):
    order, run, first, second = two_node_run(people, sim_dir)
    prepare(run, first)

    looks = [look_again(run, first) for _ in range(settings.PROVISIONING_STEP_MAX_ATTEMPTS + 2)]

    assert {o.status for o in looks} == {"waiting"} and all(o.retry_in_s > 0 for o in looks)
    assert f"waiting for the training stack on {second.hostname}" in looks[-1].message
    step = StepRun.objects.get(run=run, node=first, step="acceptance")
    assert (step.status, step.attempts) == (StepStatus.RETRYING, 0)  # looking is no attempt
    prepare(run, second, BEFORE_ACCEPTANCE[:-1])  # stack done, access not yet
    assert "waiting for the training stack" not in look_again(run, first).message
    prepare(run, second, ("access",))
    # The job waits until the second node's own checks are over: never both on one node.
    checking = look_again(run, first)
    assert checking.status == "waiting"
    assert f"waiting for the node checks of {second.hostname} to finish" in checking.message
    assert engine.step_execute(run_id=run.pk, node_id=second.pk, step="acceptance").status == "succeeded"
    assert look_again(run, first).status == "succeeded"
    report = StepRun.objects.get(run=run, node=first, step="acceptance").result["report"]
    assert report["passed"] and report["nodes"] == 2 and report["ddp_losses"]
    other = StepRun.objects.get(run=run, node=second, step="acceptance")
    job = next(c for c in other.result["report"]["checks"] if c["name"] == "training job")
    assert job["status"] == "skip" and first.hostname in job["detail"]
    # The page and the API show every node's own checks, not only the first node's.
    shown = acceptance_report(order)
    assert {c.node for c in shown.checks if c.name == "NCCL all-reduce bus bandwidth"} == {
        first.hostname, second.hostname}
    assert shown.peak_memory_bytes == 1_180_000_000 and shown.trained


def test_the_wait_ends_at_the_steps_deadline(catalog, people, sim_dir, settings):
    _, run, first, second = two_node_run(people, sim_dir)
    prepare(run, first)
    assert look_again(run, first).status == "waiting"
    deadline = engine.step_deadline_s("acceptance")
    StepRun.objects.filter(run=run, node=first, step="acceptance").update(
        started_at=timezone.now() - timedelta(seconds=deadline - 5))

    outcome = look_again(run, first)

    assert outcome.status == "failed"
    step = StepRun.objects.get(run=run, node=first, step="acceptance")
    assert step.error.startswith(f"gave up waiting after {deadline // 60 - 1} min (the step's "
                                 f"deadline is {deadline // 60} min): waiting for the training "
                                 f"stack on {second.hostname}")


def test_a_failed_step_on_another_node_ends_the_wait_at_once_naming_it(catalog, people, sim_dir):
    _, run, first, second = two_node_run(people, sim_dir)
    prepare(run, first)
    assert look_again(run, first).status == "waiting"
    # As after staff retried the first node's step alone: the second's stack stays failed.
    StepRun.objects.filter(run=run, node=second, step="stack").update(
        status=StepStatus.FAILED, error="pip install torch==2.13.0 failed: no space left on device")

    assert look_again(run, first).status == "failed"

    step = StepRun.objects.get(run=run, node=first, step="acceptance")
    assert step.attempts == 1
    assert (f"the cluster's training job cannot run: training stack failed on {second.hostname} "
            "(pip install torch==2.13.0 failed: no space left on device)") in step.error


def test_each_node_gets_its_own_test_host_flag(catalog, people, sim_dir, monkeypatch):
    """A mixed cluster: the first node is a declared test host, the second a GPU node. The job's
    environment on the second must not inherit the first's flag."""
    seen = []
    real_run = SimulatedDriver.run

    def recording_run(self, script, **kwargs):
        seen.append((self.target.hostname, kwargs["name"], dict(kwargs.get("env") or {})))
        return real_run(self, script, **kwargs)

    monkeypatch.setattr(SimulatedDriver, "run", recording_run)
    _, run, first, second = two_node_run(people, sim_dir)
    first.driver_options = {**first.driver_options, "test_host": True}
    first.save(update_fields=["driver_options"])
    prepare(run, first)
    prepare(run, second)
    assert engine.step_execute(run_id=run.pk, node_id=second.pk, step="acceptance").status == "succeeded"
    assert look_again(run, first).status == "succeeded"

    flags = {(host, name): env["TRAINYARD_TEST_HOST"] for host, name, env in seen
             if name.startswith("acceptance")}
    assert flags == {(first.hostname, "acceptance"): "1", (first.hostname, "acceptance-checks"): "1",
                     (second.hostname, "acceptance"): "0", (second.hostname, "acceptance-checks"): "0"}


def test_job_and_checks_keep_to_their_own_directories_and_the_report_prints_whole(tmp_path):
    """The job script for real, with a stand-in launcher: it writes the report file the way
    train_smoke.py's rank 0 does, leaves a line unfinished (as a worker's output can) and exits
    1; the marker is printed whole, on a line of its own, and the checks' directory is left
    alone."""
    venv = tmp_path / "opt/trainyard/venv/bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    launcher = tmp_path / "etc/trainyard/launch.sh"
    launcher.parent.mkdir(parents=True)
    launcher.write_text('#!/bin/bash\n'
                        'workdir=$(dirname "$1")\n'
                        'printf "rank 1 said something without a newline"\n'
                        'echo \'{"passed": true, "checks": [], "losses": {"ddp": [3.2, 1.1]}}\' '
                        '> "$workdir/report.json"\n'
                        'exit 1\n')
    launcher.chmod(0o755)
    checks_file = tmp_path / CHECKS_DIR.lstrip("/") / "node_checks.py"
    checks_file.parent.mkdir(parents=True)
    checks_file.write_text("# the node checks' own file\n")

    proc = subprocess.run(["bash", "-c", job_script(prefix="acceptance/run-1")],
                          env={"TRAINYARD_ROOT": str(tmp_path), "TRAINYARD_NODE": "n1",
                               "TRAINYARD_NODE_RANK": "0", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)

    lines = proc.stdout.splitlines()
    assert find_marker(lines, JOB_MARKER) == {"passed": True, "checks": [], "losses": {"ddp": [3.2, 1.1]}}
    assert [line for line in lines if JOB_MARKER in line] == [
        f'{JOB_MARKER} {{"passed": true, "checks": [], "losses": {{"ddp": [3.2, 1.1]}}}}']
    assert any(line.startswith("rank 1 said something") for line in lines)
    assert checks_file.read_text() == "# the node checks' own file\n"
    assert (tmp_path / JOB_DIR.lstrip("/") / "train_smoke.py").is_file()


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


def test_a_marker_behind_other_output_on_its_line_still_reads():
    # torchrun's workers write unbuffered: another rank's text can land before the marker.
    line = f"[rank1]: step 3 loss 2.1{JOB_MARKER} {{\"passed\": true}}"
    assert find_marker(["x", line], JOB_MARKER) == {"passed": True}


@pytest.mark.django_db
def test_a_diverged_loss_is_stored_and_fails_nothing_silently(catalog, people, sim_dir):
    """Python's json writes NaN, which PostgreSQL refuses (Token "NaN" is invalid)."""
    line = (f'{JOB_MARKER} {{"passed": false, "losses": {{"ddp": [6.1, NaN, NaN], "fsdp2": [6.0, 2.0]}}, '
            f'"throughput": {{"ddp_tokens_per_s": Infinity}}, "checks": [{{"name": "DDP loss falls", '
            f'"status": "fail", "detail": "loss diverged (nan) at step 2 of 3", "value": NaN}}]}}')
    job = find_marker([line], JOB_MARKER)
    report = AcceptanceReport(checks=(), **job_fields(job))
    assert report.ddp_losses == (6.1,) and report.fsdp_losses == (6.0, 2.0)
    assert report.tokens_per_s == {}
    result = AcceptanceResult(report=report).to_dict()
    json.dumps(result, allow_nan=False)  # what PostgreSQL will take
    make_node(sku=H100_SKU, state_dir=sim_dir)
    run = approved_order(people).runs.get()
    runs.run_start(run_id=run.pk)
    StepRun.objects.filter(run=run, step="acceptance").update(result=result)
    stored = AcceptanceResult.from_dict(StepRun.objects.get(run=run, step="acceptance").result)
    assert stored.report.ddp_losses == (6.1,) and not any(
        isinstance(v, float) and not math.isfinite(v) for v in stored.report.ddp_losses)


@pytest.mark.parametrize("bucket", [False, True])
def test_only_an_order_with_a_bucket_reads_the_nodes_bucket_settings(tmp_path, bucket):
    """A node's s3.env may be another order's (a hand-back that did not remove it): an order
    without a bucket never reads it. The sync tool runs with Trainyard's node tools. The job
    script for real, with a stand-in launcher that says what it was given."""
    from provisioning.stack.paths import S3_ENV, TOOLS_PYTHON

    venv = tmp_path / "opt/trainyard/venv/bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    launcher = tmp_path / "etc/trainyard/launch.sh"
    launcher.parent.mkdir(parents=True)
    launcher.write_text('#!/bin/bash\necho "profile ${AWS_PROFILE:-none}; args $*"\n')
    launcher.chmod(0o755)
    (tmp_path / S3_ENV.lstrip("/")).write_text("AWS_PROFILE=another-order\n")

    proc = subprocess.run(["bash", "-c", job_script(prefix="acceptance/run-1", bucket=bucket)],
                          env={"TRAINYARD_ROOT": str(tmp_path), "TRAINYARD_NODE": "n1",
                               "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)

    said = next(line for line in proc.stdout.splitlines() if line.startswith("profile "))
    assert said.startswith("profile another-order;" if bucket else "profile none;")
    assert f"--sync-python {tmp_path}{TOOLS_PYTHON} --prefix acceptance/run-1 --steps 30" in said


def test_a_node_without_the_stack_says_so_and_runs_nothing(tmp_path):
    proc = subprocess.run(["bash", "-c", job_script(prefix="p")], capture_output=True, text=True,
                          env={"TRAINYARD_ROOT": str(tmp_path), "TRAINYARD_NODE": "n1",
                               "PATH": "/usr/bin:/bin"}, timeout=60)
    assert proc.returncode == STACK_MISSING
    assert proc.stdout.startswith(f"{ERROR_MARKER} the training stack is not installed on n1:")
    assert not (tmp_path / JOB_DIR.lstrip("/")).exists()
