"""How many e-mails a customer gets for one order (issue 29, item 6): received (or waiting),
approved, ready, and one for a problem; setting up, testing, staff retries and swaps are not news.
Every event's e-mail task runs, as the worker would after each commit."""

from django.core import mail

from portal.catalog.models import ServerSKU
from portal.orders.models import OrderEvent
from portal.orders.tasks import order_event_notify_task
from provisioning.pipeline import services as pipeline_services
from tests.factories import H100_SKU, approved_order, drain, make_node, make_order, submitted_order


def _customer_subjects(order) -> list[str]:
    for event in OrderEvent.objects.filter(order=order).order_by("pk"):
        order_event_notify_task(event.pk)
    return [m.subject.split(": ", 1)[1] for m in mail.outbox
            if m.subject.startswith(f"[Trainyard] Order {order.reference}")]


def test_a_normal_order_sends_received_approved_ready(catalog, people, sim_dir, mailoutbox):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)
    assert _customer_subjects(order) == ["Pending approval", "Approved", "Active"]


def test_a_failure_retried_by_staff_is_one_problem_email(catalog, people, sim_dir, mailoutbox):
    make_node(sku=H100_SKU, state_dir=sim_dir, fail={"stack": {"permanent": "image mismatch"}})
    order = approved_order(people)
    run = order.runs.get()
    drain(run.pk)
    pipeline_services.run_retry_step(run=run, by=people.sam)
    drain(run.pk)
    order.refresh_from_db()
    assert order.state == "provision_failed"
    assert OrderEvent.objects.filter(order=order, to_state="provision_failed").count() == 2
    assert _customer_subjects(order) == ["Pending approval", "Approved", "Provisioning failed"]


def test_an_order_approved_at_once_is_one_email_that_says_received_and_approved(
        catalog, people, sim_dir, mailoutbox):
    make_order(people.acme, state="active")  # an existing customer
    OrderEvent.objects.create(order=make_order(people.acme), transition="activate",
                              from_state="verifying", to_state="active")
    ServerSKU.objects.filter(slug=H100_SKU).update(approval_policy=ServerSKU.ApprovalPolicy.AUTO_SMALL)
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = submitted_order(people)
    assert order.state == "approved"
    assert _customer_subjects(order) == ["Approved"]
    assert "We have received your order and approved it" in mail.outbox[-1].body
