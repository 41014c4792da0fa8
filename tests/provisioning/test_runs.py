"""The run state machine (every status write goes through it) and the one service that cancels an
order's open runs."""

import pytest

from portal.core.states import TransitionNotAllowed
from portal.orders.services import order_place
from provisioning.fulfilment.approvals import order_approve
from provisioning.fulfilment.orders import order_cancel, order_submit
from provisioning.models import ProvisioningRun, RunEvent
from provisioning.pipeline.runs import run_create, runs_cancel
from provisioning.states import RUN_TRANSITIONS, RunKind, RunStatus
from provisioning.transitions import run_transition
from tests.factories import H100_SKU, make_node, make_quote

ALLOWED = [(t.name, s) for t in RUN_TRANSITIONS for s in sorted(t.sources)]
FORBIDDEN = [(t.name, s) for t in RUN_TRANSITIONS for s in RunStatus.values if s not in t.sources]


def test_the_run_table_lists_the_moves_of_a_run():
    moves = {t.name: (set(t.sources), t.target) for t in RUN_TRANSITIONS}
    assert moves == {
        "start": ({"pending"}, "running"),
        "succeed": ({"running"}, "succeeded"),
        "fail": ({"running"}, "failed"),
        "resume": ({"failed"}, "running"),
        "cancel": ({"pending", "running"}, "cancelled"),
    }


def _order(people, sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    quote = make_quote(people.acme, by=people.alice)
    return order_approve(order=order_submit(order=order_place(quote=quote, by=people.alice),
                                            by=people.alice), by=people.sam)


@pytest.mark.parametrize(("name", "source"), ALLOWED)
def test_an_allowed_run_transition_is_recorded(catalog, people, sim_dir, name, source):
    order = _order(people, sim_dir)
    run = ProvisioningRun.objects.create(order=order, kind=RunKind.REBOOT, status=source)
    run_transition(run=run, name=name, by=people.sam, error="boom" if name == "fail" else None)
    target = RUN_TRANSITIONS.get(name).target
    saved = ProvisioningRun.objects.get(pk=run.pk)
    assert saved.status == run.status == target
    event = RunEvent.objects.get(run=run, transition=name)
    assert (event.from_state, event.to_state, event.actor) == (source, target, people.sam)
    if name == "start":
        assert saved.started_at is not None
    elif target == RunStatus.RUNNING:  # resumed: no longer finished, no error
        assert (saved.finished_at, saved.error) == (None, "")
    else:
        assert saved.finished_at is not None
        assert saved.error == ("boom" if name == "fail" else "")


@pytest.mark.parametrize(("name", "source"), FORBIDDEN)
def test_a_forbidden_run_transition_is_refused_and_changes_nothing(catalog, people, sim_dir,
                                                                    name, source):
    order = _order(people, sim_dir)
    run = ProvisioningRun.objects.create(order=order, kind=RunKind.REBOOT, status=source)
    with pytest.raises(TransitionNotAllowed, match=f"run #{run.pk}"):
        run_transition(run=run, name=name)
    assert ProvisioningRun.objects.get(pk=run.pk).status == source
    assert not RunEvent.objects.filter(run=run).exists()


def test_runs_cancel_cancels_the_pending_and_running_runs_of_one_order(catalog, people, sim_dir):
    order = _order(people, sim_dir)
    other = _order(people, sim_dir)
    provision = order.runs.get()  # pending until a worker starts it
    running = run_create(order=order, kind=RunKind.REBOOT, nodes=[])
    run_transition(run=running, name="start")
    done = run_create(order=order, kind=RunKind.REBOOT, nodes=[])
    run_transition(run=done, name="start")
    run_transition(run=done, name="succeed")

    assert runs_cancel(order=order, reason="order termination requested", by=people.sam) == 2

    statuses = dict(order.runs.values_list("pk", "status"))
    assert statuses == {provision.pk: "cancelled", running.pk: "cancelled", done.pk: "succeeded"}
    for run in (provision, running):
        run.refresh_from_db()
        assert run.error == "order termination requested" and run.finished_at is not None
        assert run.events.last().transition == "cancel"
    assert other.runs.get().status == RunStatus.PENDING  # another order's run is left alone
    assert runs_cancel(order=order, reason="again") == 0  # nothing open any more


def test_cancelling_an_order_cancels_its_pending_run_through_the_table(catalog, people, sim_dir):
    order = _order(people, sim_dir)
    order_cancel(order=order, by=people.alice, reason="changed my mind")
    run = order.runs.get()
    assert (run.status, run.error) == ("cancelled", "order cancelled")
    assert list(run.events.values_list("from_state", "to_state")) == [("pending", "cancelled")]
