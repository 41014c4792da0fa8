"""After a failed set-up: the customer reads a safe reason and can cancel for free (the nodes
the failed run touched are wiped and go back to stock); staff cancel with a reason the customer
reads; nothing internal (driver messages, management addresses, staff notes) reaches the
customer's pages."""

import pytest

from portal.orders.states import OrderState
from provisioning.fulfilment import approvals
from provisioning.models import Node, ProvisioningRun
from provisioning.states import NodeState, RunKind
from tests.factories import H100_SKU, drain, make_node

DRIVER_DETAIL = "host (10.0.0.5:22): TCP connect timed out; without driver_options.ipmi"
STAFF_NOTE = "checked the fabric with the NOC"


@pytest.fixture
def failed(people, sim_dir, placed):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-h100-a01",
                     fail={"stack": {"permanent": DRIVER_DETAIL}})
    approvals.order_approve(order=placed, by=people.sam, note=STAFF_NOTE)
    drain(placed.runs.get().pk)
    placed.refresh_from_db()
    assert placed.state == OrderState.PROVISION_FAILED
    return placed, node


def _html(client, url):
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_a_failed_order_says_where_it_stopped_and_offers_a_free_cancel(login, people, failed):
    order, _ = failed
    html = _html(login(people.alice), f"/orders/{order.reference}/")
    assert "Set-up stopped at “Training stack” on gpu-h100-a01" in html
    assert "Nothing is billed" in html and "cancel the order at no charge" in html
    assert "mailto:support@localhost" in html
    assert "Cancel order" in html and "never handed over, so cancelling costs nothing" in html
    assert "Terminate" not in html and "Billing stops when the wipe is done" not in html


def test_the_customer_pages_show_no_internal_detail(login, people, failed):
    order, _ = failed
    client = login(people.alice)
    html = _html(client, f"/orders/{order.reference}/")
    html += _html(client, f"/orders/{order.reference}/progress/")
    for secret in ("10.0.0.5", "TCP connect", "driver_options", STAFF_NOTE, "nodes: gpu-h100-a01",
                   order.failure_reason):
        assert secret not in html, secret
    assert "Training stack could not be completed; our staff has been told" in html
    assert "Trainyard staff" in html and ">sam<" not in html  # who approved, not their login


def test_staff_read_the_full_detail_on_the_same_page(login, people, failed):
    order, _ = failed
    html = _html(login(people.sam), f"/orders/{order.reference}/")
    assert STAFF_NOTE in html and "10.0.0.5" in html  # staff note and failure reason
    assert "Cancel for the customer" in html and "Reason (the customer reads it)" in html


def test_cancelling_a_failed_order_wipes_its_nodes_and_keeps_it_cancelled(login, people, failed):
    order, node = failed
    Node.objects.filter(pk=node.pk).update(driver_options={**node.driver_options, "fail": {}})
    response = login(people.alice).post(f"/orders/{order.reference}/cancel/", {"reason": "too late"},
                                        follow=True)
    assert "is cancelled; nothing is billed" in response.content.decode()
    order.refresh_from_db()
    assert order.state == OrderState.CANCELLED
    wipe = ProvisioningRun.objects.get(order=order, kind=RunKind.TERMINATE)
    drain(wipe.pk)
    node.refresh_from_db()
    order.refresh_from_db()
    assert (node.state, node.order_id, order.state) == (NodeState.READY, None, OrderState.CANCELLED)
    assert not order.events.filter(to_state=OrderState.TERMINATED).exists()
    html = _html(login(people.alice), f"/orders/{order.reference}/")
    assert "Cancelled: too late" in html


def test_staff_cancel_a_failed_order_only_with_a_reason_the_customer_reads(login, people, failed):
    order, _ = failed
    staff = login(people.sam)
    response = staff.post(f"/orders/{order.reference}/cancel/", {"reason": ""}, follow=True)
    assert "Give the customer a reason for the cancellation." in response.content.decode()
    order.refresh_from_db()
    assert order.state == OrderState.PROVISION_FAILED
    staff.post(f"/orders/{order.reference}/cancel/",
               {"reason": "No replacement node this month; sorry."})
    order.refresh_from_db()
    assert order.state == OrderState.CANCELLED
    html = _html(login(people.alice), f"/orders/{order.reference}/")
    assert "Cancelled: No replacement node this month; sorry." in html


def test_the_terminate_page_of_a_failed_order_points_to_cancel(login, people, failed):
    order, _ = failed
    client = login(people.alice)
    html = _html(client, f"/orders/{order.reference}/terminate/")
    assert "nothing to terminate" in html and "Cancel the order" in html
    assert "Keep it running" not in html and "Billing for the server stops" not in html
    client.post(f"/orders/{order.reference}/terminate/", {"confirm": "on"})
    order.refresh_from_db()
    assert order.state == OrderState.PROVISION_FAILED


def test_the_staff_run_page_offers_the_cancel_with_a_reason(login, people, failed):
    order, _ = failed
    run = order.runs.get()
    html = _html(login(people.olga), f"/ops/runs/{run.pk}/")
    assert "Cancel for the customer" in html and f'action="/orders/{order.reference}/cancel/"' in html
    assert DRIVER_DETAIL in html  # the full staff log
