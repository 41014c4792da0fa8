"""Claims in one process: fencing tokens, deadlines measured per execution, log labels per
execution, a database blip while recording, and a later run waiting for an earlier execution."""

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from provisioning.drivers.simulated import read_journal
from provisioning.fulfilment.orders import order_request_termination
from provisioning.models import Node, StepLogLine, StepRun
from provisioning.pipeline import engine, runs, sweeper
from provisioning.pipeline import services as pipeline_services
from tests.factories import H100_SKU, approved_order, drain, make_node


def _at_deploy(people, sim_dir, **node_options):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, **node_options)
    order = approved_order(people)
    run = order.runs.get()
    runs.run_start(run_id=run.pk)
    assert engine.step_execute(run_id=run.pk, node_id=node.pk, step="reserve").status == "succeeded"
    return node, order, run


def test_each_claim_takes_the_next_fencing_token_of_its_node(catalog, people, sim_dir):
    node, order, run = _at_deploy(people, sim_dir)
    drain(run.pk)
    tokens = list(StepRun.objects.filter(run=run).order_by("position").values_list("fence", flat=True))
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    node.refresh_from_db()
    assert node.fence == tokens[-1]
    fences = [e["fence"] for e in read_journal(node.hostname, sim_dir) if e["event"] == "start"]
    assert fences and all(f in tokens for f in fences)  # every operation carried its claim


def test_a_token_is_at_least_the_claims_time_in_microseconds(catalog, people, sim_dir):
    """So a node keeps refusing the work of a previous life of its row (re-enrolled, database
    restored); a value past 32 bits, bound by the server (prepared statements) as such."""
    before = int(timezone.now().timestamp() * 1_000_000)
    node, _, run = _at_deploy(people, sim_dir)
    node.refresh_from_db()
    assert node.fence >= before > 2**32
    assert StepRun.objects.get(run=run, step="reserve").fence == node.fence


def test_the_deadline_counts_from_the_current_execution(catalog, people, sim_dir, settings):
    settings.PROVISIONING_STEP_DEADLINES_S = {"deploy_os": 45}
    node, order, run = _at_deploy(people, sim_dir)
    now = timezone.now()
    StepRun.objects.filter(step="deploy_os").update(
        status="running", claimed_by="w1", attempts=2, executions=2, started_at=now - timedelta(hours=2),
        claimed_at=now - timedelta(seconds=10), lease_expires_at=now + timedelta(seconds=30))
    assert sweeper.sweep().failed == 0  # its first execution was long ago; this one is young
    StepRun.objects.filter(step="deploy_os").update(claimed_at=now - timedelta(seconds=50))
    assert sweeper.sweep().failed == 1
    assert StepRun.objects.get(step="deploy_os").error == (
        "deploy_os timed out: still unfinished after 50 s (deadline 45 s)")


def test_a_step_waiting_to_retry_is_not_timed_out(catalog, people, sim_dir, settings):
    settings.PROVISIONING_STEP_DEADLINES_S = {"deploy_os": 30}
    node, order, run = _at_deploy(people, sim_dir)
    StepRun.objects.filter(step="deploy_os").update(
        status="retrying", attempts=1, started_at=timezone.now() - timedelta(hours=1),
        retry_at=timezone.now() + timedelta(minutes=5))
    assert sweeper.sweep().failed == 0
    assert StepRun.objects.get(step="deploy_os").status == "retrying"


def test_a_staff_retry_starts_a_new_attempt_window(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir,
                     fail={"deploy_os": {"permanent": "PXE boot refused"}})
    order = approved_order(people)
    run = order.runs.get()
    drain(run.pk)
    StepRun.objects.filter(step="deploy_os").update(started_at=timezone.now() - timedelta(days=1))
    Node.objects.filter(pk=node.pk).update(driver_options={"delay_scale": 0,
                                                           "state_dir": str(sim_dir)})
    pipeline_services.run_retry_step(run=run, by=people.sam)
    step = StepRun.objects.get(step="deploy_os")
    assert (step.status, step.attempts, step.claimed_by, step.started_at) == ("pending", 0, "", None)
    drain(run.pk)
    step.refresh_from_db()
    assert (step.status, step.attempts, step.executions) == ("succeeded", 1, 2)
    # The log tells the two executions apart (the attempt count started again at 1).
    assert sorted(set(StepLogLine.objects.filter(step_run=step).values_list("attempt", flat=True))) == [1, 2]


def test_a_database_error_in_a_step_is_retried_not_failed(catalog, people, sim_dir, monkeypatch):
    node, order, run = _at_deploy(people, sim_dir)
    real = engine.STEP_FUNCTIONS["deploy_os"]
    calls = []

    def flaky(ctx):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("terminating connection due to administrator command")
        return real(ctx)

    monkeypatch.setitem(engine.STEP_FUNCTIONS, "deploy_os", flaky)
    first = engine.step_execute(run_id=run.pk, node_id=node.pk, step="deploy_os")
    assert first.status == "retry"
    step = StepRun.objects.get(step="deploy_os")
    assert step.status == "retrying" and "database connection lost during deploy os" in step.error
    StepRun.objects.filter(pk=step.pk).update(retry_at=timezone.now())  # the backoff ran out
    drain(run.pk)
    order.refresh_from_db()
    assert order.state == "active"


def test_a_database_error_while_recording_is_retried(transactional_db, catalog, people, sim_dir,
                                                     monkeypatch):
    # transactional_db: as in a worker, no transaction wraps the step (a blip inside one is the
    # outermost caller's to retry).
    node, order, run = _at_deploy(people, sim_dir)
    real = engine._succeed
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "_succeed", flaky)
    outcome = engine.step_execute(run_id=run.pk, node_id=node.pk, step="deploy_os")
    assert outcome.status == "succeeded" and len(calls) == 2
    assert StepRun.objects.get(step="deploy_os").status == "succeeded"


@pytest.mark.usefixtures("catalog")
def test_a_later_run_waits_for_an_execution_of_a_run_that_is_over(people, sim_dir):
    node, order, run = _at_deploy(people, sim_dir)
    # A worker holds deploy_os (live lease) when the run fails elsewhere and the order terminates.
    StepRun.objects.filter(step="deploy_os", run=run).update(
        status="running", claimed_by="w1", attempts=1, executions=1, claimed_at=timezone.now(),
        lease_expires_at=timezone.now() + timedelta(seconds=30))
    run.status = "failed"
    run.save(update_fields=["status"])
    order.state = "provision_failed"
    order.save(update_fields=["state"])
    order_request_termination(order=order, by=people.alice)
    terminate = order.runs.get(kind="terminate")
    runs.run_start(run_id=terminate.pk)
    first = terminate.steps.order_by("position").first()
    outcome = engine.step_execute(run_id=terminate.pk, node_id=node.pk, step=first.step)
    assert outcome.status == "busy" and "waiting for deploy_os" in outcome.message
    held = StepRun.objects.get(step="deploy_os", run=run)
    assert held.stop_requested and held.status == "running"
    assert not [e for e in read_journal(node.hostname, sim_dir) if e["name"] != "deploy_os"
                and e["event"] == "start"]
    # The worker acknowledged (its lease renewal found the stop request and it stopped):
    StepRun.objects.filter(pk=held.pk).update(status="failed", lease_expires_at=None)
    drain(terminate.pk)
    order.refresh_from_db()
    node.refresh_from_db()
    assert (order.state, node.state) == ("terminated", "ready")
