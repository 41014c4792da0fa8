"""The pipeline run in-process with the simulated driver (workers: see test_tasks_worker.py)."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from portal.core.states import DomainError
from portal.orders.states import OrderState
from provisioning.drivers.simulated import read_journal
from provisioning.fulfilment import day2
from provisioning.fulfilment.orders import order_request_termination
from provisioning.fulfilment.selectors import acceptance_report, order_progress
from provisioning.models import Node, ProvisioningRun, StepRun
from provisioning.pipeline import engine, runs, sweeper
from provisioning.pipeline import services as pipeline_services
from provisioning.states import STEPS, NodeState, RunKind, RunStatus, StepStatus, step_spec
from tests.factories import H100_SKU, approved_order, drain, make_node

PROVISION_STEPS = [spec.name for spec in STEPS[RunKind.PROVISION]]


def _journal_ok(node, sim_dir):
    return [e["name"] for e in read_journal(node.hostname, sim_dir) if e["event"] == "ok"]


def test_an_approved_order_becomes_active(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    outcomes = drain(order.runs.get().pk)
    assert [o.status for _, o in outcomes] == ["succeeded"] * len(STEPS[RunKind.PROVISION])
    order.refresh_from_db()
    node.refresh_from_db()
    assert (order.state, order.target_state, node.state) == ("active", "", "active")
    assert [e.to_state for e in order.events.all()] == [
        "draft", "submitted", "pending_approval", "approved", "provisioning", "verifying", "active"]
    assert [e.to_state for e in node.events.all()] == [
        "ready", "reserved", "deploying", "configuring", "validating", "active"]
    run = order.runs.get()
    assert run.status == RunStatus.SUCCEEDED
    assert set(run.steps.values_list("status", flat=True)) == {"succeeded"}
    # The node's own checks run before the training job: never both on the node at once.
    assert _journal_ok(node, sim_dir) == ["power_on", "deploy_os", "configure", "stack", "access",
                                          "acceptance-checks", "acceptance"]
    report = acceptance_report(order)
    assert report.passed and report.gpu_count == 8
    assert report.simulated and report.trained and report.fsdp_losses[-1] < report.fsdp_losses[0]
    progress = order_progress(order)
    assert progress.percent == 100 and progress.done
    assert [s.name for s in progress.nodes[0].steps] == PROVISION_STEPS
    deploy = progress.nodes[0].steps[1]
    assert deploy.log_lines == ("Operating system installed (ubuntu-24.04-cuda-12.8)",)
    staff_deploy = order_progress(order, staff=True).nodes[0].steps[1]
    assert "ubuntu-24.04-cuda-12.8 installed; node rebooted into the new system" in staff_deploy.log_lines


def test_a_succeeded_step_is_never_executed_again(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    run = order.runs.get()
    drain(run.pk)
    before = read_journal(node.hostname, sim_dir)
    for step in PROVISION_STEPS:  # redelivered tasks
        outcome = engine.step_execute(run_id=run.pk, node_id=node.pk, step=step)
        assert (outcome.status, outcome.next_steps) == ("already_done", ())
    assert read_journal(node.hostname, sim_dir) == before
    assert runs.run_start(run_id=run.pk) == []  # a redelivered start does nothing either
    assert list(StepRun.objects.filter(run=run).values_list("attempts", flat=True)) == [1] * len(
        STEPS[RunKind.PROVISION])


def test_a_step_is_not_run_before_the_one_before_it(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    run = approved_order(people).runs.get()
    runs.run_start(run_id=run.pk)
    assert engine.step_execute(run_id=run.pk, node_id=node.pk, step="stack").status == "blocked"
    assert read_journal(node.hostname, sim_dir) == []


def test_a_cluster_is_provisioned_and_activated_once_all_nodes_pass(catalog, people, sim_dir):
    nodes = [make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="f1") for _ in range(3)]
    order = approved_order(people, node_count=3)
    drain(order.runs.get().pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    assert order.events.filter(to_state="active").count() == 1
    assert {n.state for n in Node.objects.filter(pk__in=[n.pk for n in nodes])} == {"active"}
    ranks = sorted(r.result["hostname"] for r in StepRun.objects.filter(step="handover"))
    assert ranks == sorted(n.hostname for n in nodes)


def test_a_transient_driver_failure_twice_then_success(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, fail={"configure": {"transient": 2}})
    order = approved_order(people)
    outcomes = drain(order.runs.get().pk)
    configure = [o for key, o in outcomes if key[2] == "configure"]
    assert [o.status for o in configure] == ["retry", "retry", "succeeded"]
    assert configure[0].retry_in_s > 0
    step = StepRun.objects.get(step="configure")
    assert (step.status, step.attempts) == ("succeeded", 3)
    log = [line.text for line in step.log_lines.filter(staff_only=True)]
    assert any("attempt 1 failed: configure: simulated transient failure 1 of 2" in x for x in log)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    assert _journal_ok(node, sim_dir).count("configure") == 1


def test_transient_failures_give_up_after_the_attempt_limit(catalog, people, sim_dir, settings):
    settings.PROVISIONING_STEP_MAX_ATTEMPTS = 3
    make_node(sku=H100_SKU, state_dir=sim_dir, fail={"deploy_os": {"transient": 99}})
    order = approved_order(people)
    drain(order.runs.get().pk)
    step = StepRun.objects.get(step="deploy_os")
    assert (step.status, step.attempts) == ("failed", 3)
    assert step.error == "gave up after 3 attempts: deploy_os: simulated transient failure 3 of 99"


def test_a_script_exiting_75_is_retried_as_transient(catalog, people, sim_dir, settings):
    settings.PROVISIONING_STEP_MAX_ATTEMPTS = 2
    make_node(sku=H100_SKU, state_dir=sim_dir, exit_status={"stack": 75})
    order = approved_order(people)
    drain(order.runs.get().pk)
    step = StepRun.objects.get(step="stack")
    assert (step.status, step.attempts) == ("failed", 2)
    assert "asked to be retried later (exit 75)" in step.error


def test_a_permanent_driver_failure_fails_step_node_and_order(catalog, people, sim_dir,
                                                            mailoutbox):
    node = make_node(sku=H100_SKU, state_dir=sim_dir,
                     fail={"deploy_os": {"permanent": "image checksum mismatch"}})
    order = approved_order(people)
    outcomes = drain(order.runs.get().pk)
    assert [o.status for _, o in outcomes] == ["succeeded", "failed"]
    step = StepRun.objects.get(step="deploy_os")
    assert (step.status, step.attempts, step.error) == (
        "failed", 1, "deploy_os: image checksum mismatch")
    node.refresh_from_db()
    order.refresh_from_db()
    assert node.state == NodeState.FAILED_DEPLOY
    assert order.state == OrderState.PROVISION_FAILED
    assert order.failure_reason == (f"Deploy OS failed on {node.hostname}: "
                                    "deploy_os: image checksum mismatch")
    assert order.runs.get().status == RunStatus.FAILED
    assert StepRun.objects.filter(step="configure").get().status == StepStatus.PENDING


def test_staff_retry_a_failed_step_after_the_cause_is_fixed(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, exit_status={"stack": 1})
    order = approved_order(people)
    run = order.runs.get()
    drain(run.pk)
    order.refresh_from_db()
    assert order.state == OrderState.PROVISION_FAILED
    assert StepRun.objects.get(step="stack").error == \
        "stack script exited with status 1: stack: simulated failure, exit status 1"
    Node.objects.filter(pk=node.pk).update(driver_options={"delay_scale": 0,
                                                           "state_dir": str(sim_dir)})
    with pytest.raises(PermissionDenied, match="Only staff"):
        pipeline_services.run_retry_step(run=run, by=people.alice)
    pipeline_services.run_retry_step(run=run, by=people.sam)
    order.refresh_from_db()
    assert order.state == OrderState.PROVISIONING
    queue = runs.run_frontier(run)
    assert queue == [(run.pk, node.pk, "stack")]
    while queue:
        outcome = engine.step_execute(run_id=queue[0][0], node_id=queue[0][1], step=queue[0][2])
        queue = list(outcome.next_steps)
    order.refresh_from_db()
    node.refresh_from_db()
    assert (order.state, node.state) == ("active", "active")
    assert _journal_ok(node, sim_dir).count("deploy_os") == 1  # done steps were not redone


def test_staff_swap_a_failed_node(catalog, people, sim_dir):
    bad = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-bad",
                    fail={"deploy_os": {"permanent": "disk not found"}})
    spare = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-spare")
    order = approved_order(people)
    run = order.runs.get()
    drain(run.pk)
    new = pipeline_services.run_swap_node(run=run, node=bad, by=people.sam)
    assert new == spare
    queue = runs.run_frontier(run)
    while queue:
        key = queue.pop(0)
        queue += engine.step_execute(run_id=key[0], node_id=key[1], step=key[2]).next_steps
    order.refresh_from_db()
    bad.refresh_from_db()
    spare.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    assert (bad.state, bad.order) == (NodeState.FAILED_DEPLOY, None)
    assert (spare.state, spare.order) == (NodeState.ACTIVE, order)
    assert set(run.steps.filter(node=bad).values_list("status", flat=True)) == {
        "succeeded", "skipped"}
    assert run.steps.get(node=bad, step="deploy_os").error == (
        "deploy_os: disk not found; node swapped for gpu-spare")
    assert order_progress(order).nodes[0].hostname == "gpu-spare"


def test_object_storage_on_a_provider_without_admin_credentials_fails_loudly(catalog, people, sim_dir,
                                                                            settings):
    settings.STORAGE_PROVIDERS = {**settings.STORAGE_PROVIDERS, "minio": {}}
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, storage="minio", storage_tb=10)
    drain(order.runs.get().pk)
    step = StepRun.objects.get(step="storage")
    assert step.status == "failed"
    assert ("storage provider 'minio' has no admin credentials: set STORAGE_MINIO_ACCESS_KEY and "
            "STORAGE_MINIO_SECRET_KEY (docs/storage.md)") in step.error
    order.refresh_from_db()
    assert order.state == OrderState.PROVISION_FAILED


def test_acceptance_fails_when_a_gpu_is_missing(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, gpu_count=7)
    order = approved_order(people)
    drain(order.runs.get().pk)
    step = StepRun.objects.get(step="acceptance")
    assert step.error == f"acceptance test failed: {node.hostname}: GPUs visible (7 of 8)"
    assert step.result["report"]["passed"] is False
    node.refresh_from_db()
    order.refresh_from_db()
    assert (node.state, order.state) == (NodeState.FAILED_VALIDATION, OrderState.PROVISION_FAILED)


def test_termination_revokes_wipes_and_returns_nodes_to_stock(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)
    order_request_termination(order=order, by=people.alice)
    assert order.state == OrderState.TERMINATING and order.target_state == "terminated"
    run = order.runs.get(kind="terminate")
    drain(run.pk)
    order.refresh_from_db()
    node.refresh_from_db()
    assert (order.state, node.state, node.order) == ("terminated", "ready", None)
    assert list(run.steps.values_list("step", flat=True)) == [
        "revoke_access", "retain_data", "revoke_keys", "sanitise", "attest", "ready"]
    # Access ends first, on the node; the disks are erased after, through the same driver.
    assert _journal_ok(node, sim_dir)[-2:] == ["revoke_access", "sanitise"]


def test_day_two_reboot_and_redeploy(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)
    with pytest.raises(PermissionDenied, match="cannot act"):
        day2.server_reboot(order=order, by=people.charlie)
    reboot = day2.server_reboot(order=order, by=people.alice)
    with pytest.raises(DomainError, match="already in progress"):
        day2.server_redeploy_stack(order=order, by=people.alice)
    drain(reboot.pk)
    redeploy = day2.server_redeploy_stack(order=order, by=people.alice)
    drain(redeploy.pk)
    order.refresh_from_db()
    node.refresh_from_db()
    assert (order.state, node.state) == ("active", "active")
    assert ProvisioningRun.objects.get(pk=redeploy.pk).status == "succeeded"
    assert _journal_ok(node, sim_dir)[-4:] == ["power_reboot", "stack", "acceptance-checks", "acceptance"]


def test_a_step_whose_worker_died_is_taken_over_after_its_lease(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    run = approved_order(people).runs.get()
    runs.run_start(run_id=run.pk)
    engine.step_execute(run_id=run.pk, node_id=node.pk, step="reserve")
    # a worker claimed deploy_os and died: its lease still runs
    StepRun.objects.filter(step="deploy_os").update(
        status="running", claimed_by="dead", attempts=1, started_at=timezone.now(),
        lease_expires_at=timezone.now() + timedelta(seconds=30))
    busy = engine.step_execute(run_id=run.pk, node_id=node.pk, step="deploy_os")
    assert busy.status == "busy" and 25 < busy.retry_in_s <= 31
    StepRun.objects.filter(step="deploy_os").update(lease_expires_at=timezone.now()
                                                    - timedelta(seconds=1))
    taken = engine.step_execute(run_id=run.pk, node_id=node.pk, step="deploy_os")
    assert taken.status == "succeeded"
    assert StepRun.objects.get(step="deploy_os").attempts == 2


def test_the_sweeper_fails_a_step_past_its_deadline(catalog, people, sim_dir, settings):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    run = order.runs.get()
    runs.run_start(run_id=run.pk)
    engine.step_execute(run_id=run.pk, node_id=node.pk, step="reserve")
    started = timezone.now() - timedelta(hours=3)
    StepRun.objects.filter(step="deploy_os").update(
        status="running", claimed_by="hung", attempts=1, started_at=started,
        lease_expires_at=timezone.now() + timedelta(seconds=30))
    Node.objects.filter(pk=node.pk).update(state="deploying")
    result = sweeper.sweep()
    assert result.failed == 1
    step = StepRun.objects.get(step="deploy_os")
    assert step.status == "failed"
    assert step.error == "deploy_os timed out: still unfinished after 180 min (deadline 120 min)"
    order.refresh_from_db()
    node.refresh_from_db()
    assert (order.state, node.state) == ("provision_failed", "failed_deploy")
    # the hung worker finishing later cannot overwrite the failure
    assert engine._succeed(step, step_spec("provision", "deploy_os"), {},
                             token="hung").status == "lost"


# --- internal errors are for staff ----------------------------------------------------------------
def test_an_internal_error_shows_details_to_staff_only(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    Node.objects.filter(pk=node.pk).update(nvme_devices=7)  # a bad inventory row: configure crashes
    order = approved_order(people)
    drain(order.runs.get().pk)
    step = StepRun.objects.get(step="configure")
    assert step.status == "failed"
    assert step.error.startswith("internal error in configure: TypeError: ")  # for staff
    log = [line.text for line in step.log_lines.filter(staff_only=False)]
    assert log[-1] == "FAILED: internal error; our staff has been told"
    assert not any("TypeError" in line for line in log)
    staff_log = [line.text for line in step.log_lines.filter(staff_only=True)]
    assert any("TypeError" in line for line in staff_log)
    order.refresh_from_db()
    assert order.state == OrderState.PROVISION_FAILED and "TypeError" in order.failure_reason


def test_a_result_the_database_cannot_store_fails_the_step_for_staff(catalog, people, sim_dir,
                                                                    monkeypatch):
    class NotANumber:
        def to_dict(self):
            return {"loss": float("nan")}  # PostgreSQL's JSON refuses NaN

    monkeypatch.setitem(engine.STEP_FUNCTIONS, "configure", lambda ctx: NotANumber())
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)
    step = StepRun.objects.get(step="configure")
    assert step.status == "failed"
    assert step.error.startswith("internal error in configure: its result cannot be stored (")
    assert step.result in ({}, None)
    log = [line.text for line in step.log_lines.all()]
    assert log[-1] == "FAILED: internal error; our staff has been told"
    order.refresh_from_db()
    assert order.state == OrderState.PROVISION_FAILED


# --- a retry waits for its time -------------------------------------------------------------------
def test_a_duplicate_delivery_does_not_run_a_retry_early(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, fail={"configure": {"transient": 1}})
    run = approved_order(people).runs.get()
    runs.run_start(run_id=run.pk)
    for step in ("reserve", "deploy_os"):
        engine.step_execute(run_id=run.pk, node_id=node.pk, step=step)
    first = engine.step_execute(run_id=run.pk, node_id=node.pk, step="configure")
    assert first.status == "retry"
    step = StepRun.objects.get(step="configure")
    StepRun.objects.filter(pk=step.pk).update(retry_at=timezone.now() + timedelta(seconds=60))
    early = engine.step_execute(run_id=run.pk, node_id=node.pk, step="configure")
    assert early.status == "waiting" and 55 < early.retry_in_s <= 62
    step.refresh_from_db()
    assert (step.status, step.attempts) == (StepStatus.RETRYING, 1)
    assert _journal_ok(node, sim_dir).count("configure") == 0
    StepRun.objects.filter(pk=step.pk).update(retry_at=timezone.now() - timedelta(seconds=1))
    assert engine.step_execute(run_id=run.pk, node_id=node.pk, step="configure").status == "succeeded"
    step.refresh_from_db()
    assert step.attempts == 2


# --- what the customer's log says about retries and failures ------------------------------------
MANAGEMENT_DETAIL = "host (10.0.0.5:22): TCP connect timed out; without driver_options.ipmi"


def test_driver_messages_reach_the_staff_log_and_the_customer_reads_a_summary(catalog, people,
                                                                             sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir, fail={"configure": {"transient": 1},
                                                     "stack": {"permanent": MANAGEMENT_DETAIL}})
    order = approved_order(people)
    drain(order.runs.get().pk)
    customer = order_progress(order)
    lines = [line for node in customer.nodes for step in node.steps for line in step.log_lines]
    assert "attempt 1 hit a temporary problem; retrying in" in "\n".join(lines)
    assert "FAILED: Training stack could not be completed; our staff has been told" in lines
    for secret in ("10.0.0.5", "TCP connect", "driver_options", "simulated transient"):
        assert not any(secret in line for line in lines), secret
    staff = order_progress(order, staff=True)
    staff_lines = "\n".join(line for node in staff.nodes for step in node.steps
                            for line in step.log_lines)
    assert f"FAILED: stack: {MANAGEMENT_DETAIL}" in staff_lines
    assert "attempt 1 failed: configure: simulated transient failure 1 of 1" in staff_lines
