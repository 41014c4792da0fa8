"""A termination that cannot finish: the customer's access has already ended, the node stays out
of stock, operators are e-mailed with the run's link, the staff home lists it, the order's (and a
reseller's) webhook hears it without the staff's error text; a staff retry finishes the
hand-back. The simulated driver plays the node."""

import pytest
from django.core import mail

from portal.accounts.tasks import staff_notify_task
from portal.orders.services import order_place
from portal.webhooks.models import WebhookEvent
from portal.webhooks.services import endpoint_create
from provisioning.drivers.simulated import read_journal
from provisioning.fulfilment.approvals import order_approve
from provisioning.fulfilment.orders import order_request_termination, order_submit
from provisioning.models import Node
from provisioning.pipeline.services import run_retry_step
from provisioning.staff.dashboard import staff_dashboard
from provisioning.states import NodeState
from tests.factories import H100_SKU, approved_order, drain, make_node, make_quote

pytestmark = pytest.mark.django_db


def test_a_stalled_termination_locks_out_tells_staff_and_a_retry_finishes_it(
        catalog, people, sim_dir, settings, monkeypatch, django_capture_on_commit_callbacks, login):
    settings.SITE_URL = "http://portal.example"
    people.olga.email = "olga@example.com"
    people.olga.save()
    hook = endpoint_create(organisation=people.acme, url="https://hooks.example.com/in")[0]
    node = make_node(sku=H100_SKU, state_dir=sim_dir, exit_status={"sanitise": 1})
    order = approved_order(people)
    drain(order.runs.get().pk)
    monkeypatch.setattr(staff_notify_task, "delay", lambda *args: staff_notify_task(*args))

    with django_capture_on_commit_callbacks(execute=True):
        order_request_termination(order=order, by=people.alice)
        run = order.runs.get(kind="terminate")
        outcomes = [f"{key[2]}:{outcome.status}" for key, outcome in drain(run.pk)]

    assert outcomes == ["revoke_access:succeeded", "retain_data:succeeded",
                        "revoke_keys:succeeded", "sanitise:failed"]
    ended = [e["name"] for e in read_journal(node.hostname, sim_dir) if e["event"] == "ok"]
    assert ended[-1] == "revoke_access"  # access ended on the node before anything else
    node.refresh_from_db()
    assert node.state == NodeState.FAILED_WIPE and node.order_id == order.pk  # out of stock
    [told] = [m for m in mail.outbox if m.subject.startswith("[Trainyard staff] Termination")]
    assert told.to == ["olga@example.com"]
    assert f"http://portal.example/ops/runs/{run.pk}/" in told.body and "sanitise" in told.body
    assert run in staff_dashboard(people.olga, rows=5)["failed_runs"]
    home = login(people.olga).get("/").content.decode()  # the staff home
    assert f"/ops/runs/{run.pk}/" in home and "termination" in home
    [event] = WebhookEvent.objects.filter(type="termination.stalled")
    assert event.deliveries.get().endpoint == hook
    assert event.data["step"] == "Remove tenant data" and event.data["access_ended"] is True
    assert "access is already ended" in event.data["text"]
    assert "exit" not in str(event.data)  # the staff's error stays with staff

    Node.objects.filter(pk=node.pk).update(driver_options={"delay_scale": 0, "state_dir": str(sim_dir)})
    run_retry_step(run=run, by=people.olga)
    drain(run.pk)
    node.refresh_from_db()
    order.refresh_from_db()
    assert (node.state, node.order_id, order.state) == (NodeState.READY, None, "terminated")


def test_a_reseller_hears_its_customers_stalled_termination(catalog, people, sim_dir):
    hook = endpoint_create(organisation=people.reseller, url="https://hooks.example.com/r")[0]
    make_node(sku=H100_SKU, state_dir=sim_dir, exit_status={"revoke_access": 1})
    quote = make_quote(people.client_org, by=people.rita)
    order = order_submit(order=order_place(quote=quote, by=people.rita), by=people.rita)
    order = order_approve(order=order, by=people.sam)
    drain(order.runs.get().pk)
    order_request_termination(order=order, by=people.rita)
    drain(order.runs.get(kind="terminate").pk)
    [event] = WebhookEvent.objects.filter(type="termination.stalled")
    assert event.organisation == people.client_org and event.deliveries.get().endpoint == hook
    assert event.data["step"] == "End SSH access"
    assert event.data["access_ended"] is False and "could be ended" in event.data["text"]
