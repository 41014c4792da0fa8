"""Issue 29, items 16 and 15: a rejection's internal note stays with staff (the customer reads
the reason only); the approve note says who reads it; day-2 actions are in the order history,
the customer's own ones as "you"; an older plan's stack reads by name on the approval card."""

from django.urls import reverse

from portal.orders.states import OrderState
from provisioning.fulfilment import day2
from tests.factories import (
    H100_SKU,
    SIZED_PLAN,
    approved_order,
    drain,
    make_node,
    submitted_order,
    verified_login,
)


def test_reject_keeps_the_internal_note_from_the_customer(people, catalog, client, emails_inline,
                                                          mailoutbox,
                                                          django_capture_on_commit_callbacks):
    order = submitted_order(people)
    verified_login(client, people.sam)
    page = client.get(reverse("provisioning:approvals")).content.decode()
    assert "Internal note (optional, staff only)" in page  # reject and approve alike
    assert page.count("Internal note (optional, staff only)") == 2
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("provisioning:reject", args=[order.reference]), {
            f"reject-{order.pk}-reason": "No H100 free until Monday.",
            f"reject-{order.pk}-internal_note": "Customer owes two invoices"})
    order.refresh_from_db()
    assert order.state == OrderState.REJECTED and order.rejection_reason == "No H100 free until Monday."
    staff_page = client.get(reverse("orders:detail", args=[order.reference])).content.decode()
    assert "Customer owes two invoices" in staff_page

    client.force_login(people.alice)
    customer_page = client.get(reverse("orders:detail", args=[order.reference])).content.decode()
    assert "No H100 free until Monday." in customer_page
    assert "Customer owes two invoices" not in customer_page
    assert all("Customer owes" not in m.body for m in mailoutbox)


def test_day_two_actions_are_in_the_history_and_mine_read_you(people, catalog, client, sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)
    day2.server_reboot(order=order, by=people.alice)
    client.force_login(people.alice)
    html = client.get(reverse("orders:detail", args=[order.reference])).content.decode()
    assert "Reboot requested" in html
    assert '<td data-label="Who">you</td>' in html
    assert '<td data-label="Who">alice</td>' not in html


def test_the_approval_card_names_the_stack(people, catalog, client):
    submitted_order(people, plan=SIZED_PLAN)
    verified_login(client, people.sam)
    page = client.get(reverse("provisioning:approvals")).content.decode()
    assert "FSDP full shard" in page
