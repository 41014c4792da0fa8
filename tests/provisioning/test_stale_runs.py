"""Runs that outlived their moment: an old failed run must not touch a node that moved on, a
cancelled run's late outcome changes nothing, and termination waits for a day-2 run."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.core.states import DomainError
from portal.orders.states import OrderState
from provisioning import transitions
from provisioning.drivers.simulated import read_journal
from provisioning.fulfilment import day2
from provisioning.fulfilment.orders import order_request_termination
from provisioning.models import Node, ProvisioningRun, StepRun
from provisioning.pipeline import engine, runs
from provisioning.pipeline import services as pipeline_services
from provisioning.states import NodeState, RunStatus, StepStatus, step_spec
from tests.factories import H100_SKU, approved_order, drain, make_node


def _failed_then_terminated(people, sim_dir):
    """Order A's provisioning failed on its node; A was terminated and the node wiped back into
    stock; order B then reserved the same node."""
    node = make_node(sku=H100_SKU, state_dir=sim_dir,
                     fail={"deploy_os": {"permanent": "image checksum mismatch"}})
    order_a = approved_order(people)
    failed_run = order_a.runs.get()
    drain(failed_run.pk)
    order_request_termination(order=order_a, by=people.alice)
    drain(order_a.runs.get(kind="terminate").pk)
    order_a.refresh_from_db()
    node.refresh_from_db()
    assert (order_a.state, node.state, node.order) == ("terminated", "ready", None)
    order_b = approved_order(people)
    node.refresh_from_db()
    assert (node.state, node.order) == (NodeState.RESERVED, order_b)
    return node, failed_run, order_b


def test_retrying_a_failed_run_of_a_terminated_order_is_refused(catalog, people, sim_dir):
    node, failed_run, order_b = _failed_then_terminated(people, sim_dir)
    with pytest.raises(DomainError, match="terminated"):
        pipeline_services.run_retry_step(run=failed_run, by=people.sam)
    failed_run.refresh_from_db()
    node.refresh_from_db()
    assert failed_run.status == RunStatus.FAILED
    assert (node.state, node.order) == (NodeState.RESERVED, order_b)


def test_a_step_never_runs_on_a_node_that_serves_another_order(catalog, people, sim_dir):
    node, failed_run, order_b = _failed_then_terminated(people, sim_dir)
    # however the old run got going again (admin edit, a bug elsewhere), its step must not start
    ProvisioningRun.objects.filter(pk=failed_run.pk).update(status=RunStatus.RUNNING)
    StepRun.objects.filter(run=failed_run, step="deploy_os").update(status=StepStatus.PENDING)
    Node.objects.filter(pk=node.pk).update(state=NodeState.DEPLOYING)  # B's run is deploying it
    before = read_journal(node.hostname, sim_dir)
    outcome = engine.step_execute(run_id=failed_run.pk, node_id=node.pk, step="deploy_os")
    assert outcome.status == "failed" and "no longer serves order" in outcome.message
    node.refresh_from_db()
    assert (node.state, node.order) == (NodeState.DEPLOYING, order_b)  # B's node not failed
    assert read_journal(node.hostname, sim_dir) == before


def test_swapping_a_node_of_a_terminating_order_is_refused(catalog, people, sim_dir):
    bad = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-bad",
                    fail={"deploy_os": {"permanent": "disk not found"}})
    spare = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-spare")
    order = approved_order(people)
    run = order.runs.get()
    drain(run.pk)
    order_request_termination(order=order, by=people.alice)
    with pytest.raises(DomainError, match="terminating"):
        pipeline_services.run_swap_node(run=run, node=bad, by=people.sam)
    spare.refresh_from_db()
    assert (spare.state, spare.order) == (NodeState.READY, None)  # no reservation leaked


# --- termination during a day-2 run ---------------------------------------------------------------
def _active(people, sim_dir, **node_options):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, **node_options)
    order = approved_order(people)
    drain(order.runs.get().pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    return node, order


def test_termination_is_refused_while_a_reboot_runs(catalog, people, sim_dir):
    node, order = _active(people, sim_dir)
    reboot = day2.server_reboot(order=order, by=people.alice)
    runs.run_start(run_id=reboot.pk)  # a worker may now run the reboot step on the node
    with pytest.raises(DomainError, match=r"^A reboot is in progress; terminate once it has finished\.$"):
        order_request_termination(order=order, by=people.alice)
    order.refresh_from_db()
    reboot.refresh_from_db()
    node.refresh_from_db()
    assert (order.state, reboot.status, node.state) == ("active", "running", "active")
    assert not order.runs.filter(kind="terminate").exists()
    drain(reboot.pk)  # once it has finished, termination goes ahead
    order_request_termination(order=order, by=people.alice)
    assert order.state == OrderState.TERMINATING


def _redeploy_at_handover(people, sim_dir):
    """A re-deploy whose handover step a worker holds (token "tok"), then the run is cancelled
    and the node released under it (what termination did before it refused)."""
    node, order = _active(people, sim_dir)
    run = day2.server_redeploy_stack(order=order, by=people.alice)
    runs.run_start(run_id=run.pk)
    for step in ("stack", "acceptance"):
        assert engine.step_execute(run_id=run.pk, node_id=node.pk, step=step).status == "succeeded"
    StepRun.objects.filter(run=run, step="handover").update(
        status=StepStatus.RUNNING, claimed_by="tok", attempts=1, started_at=timezone.now(),
        lease_expires_at=timezone.now() + timedelta(seconds=30))
    ProvisioningRun.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED)
    transitions.node_transition(node=node, name="release", note="termination")
    return node, order, run, StepRun.objects.get(run=run, step="handover")


def test_a_late_success_of_a_cancelled_run_changes_nothing(catalog, people, sim_dir):
    node, order, run, handover = _redeploy_at_handover(people, sim_dir)
    events = (node.events.count(), order.events.count())
    outcome = engine._succeed(handover, step_spec("redeploy_stack", "handover"), {},
                                token="tok")
    assert (outcome.status, outcome.next_steps) == ("stopped", ())
    node.refresh_from_db()
    order.refresh_from_db()
    run.refresh_from_db()
    assert (node.state, order.state, run.status) == ("releasing", "active", "cancelled")
    assert (node.events.count(), order.events.count()) == events


def test_a_late_failure_of_a_cancelled_run_changes_nothing(catalog, people, sim_dir):
    node, order, run, handover = _redeploy_at_handover(people, sim_dir)
    events = (node.events.count(), order.events.count())
    outcome = engine._fail(handover, "handover: node unreachable", token="tok")
    assert outcome.status == "stopped"
    node.refresh_from_db()
    order.refresh_from_db()
    run.refresh_from_db()
    assert (node.state, order.state, order.failure_reason) == ("releasing", "active", "")
    assert (run.status, run.error) == ("cancelled", "")
    assert (node.events.count(), order.events.count()) == events



def test_a_late_success_of_a_failed_run_leaves_a_node_that_moved_on_alone(catalog, people, sim_dir):
    """E.g. another node of a cluster failed the run, the order is being terminated, and this
    node's handover finishes late: no crash, the releasing node stays releasing."""
    node, order, run, handover = _redeploy_at_handover(people, sim_dir)
    ProvisioningRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
    outcome = engine._succeed(handover, step_spec("redeploy_stack", "handover"), {},
                                token="tok")
    assert outcome.status == "succeeded"
    node.refresh_from_db()
    assert node.state == "releasing"
