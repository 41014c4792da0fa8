"""Placing, submitting, approving, rejecting and cancelling orders through the services."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from portal.catalog.models import ServerSKU
from portal.orders.models import OrderEvent
from portal.orders.selectors import approval_queue, orders_for
from portal.orders.services import (
    order_approve,
    order_cancel,
    order_place,
    order_reject,
    order_request_termination,
    order_submit,
)
from portal.orders.states import DomainError, OrderState, QuoteAlreadyOrdered
from provisioning.allocation import OutOfStock, reservations_expire
from provisioning.models import Node, ProvisioningRun
from provisioning.states import NodeState, RunStatus
from tests.orders.factories import H100_SKU, L4_SKU, make_order, make_quote
from tests.provisioning.factories import make_node


def _submitted(people, **quote_kwargs):
    order = order_place(quote=make_quote(people.acme, by=people.alice, **quote_kwargs), by=people.alice)
    return order_submit(order=order, by=people.alice)


def _auto_small(slug=L4_SKU):
    ServerSKU.objects.filter(slug=slug).update(approval_policy=ServerSKU.ApprovalPolicy.AUTO_SMALL)


def _make_existing_customer(org):
    earlier = make_order(org, state=OrderState.VERIFYING)
    OrderEvent.objects.create(order=earlier, transition="activate", from_state="verifying",
                              to_state="active")


class TestPlace:
    def test_it_copies_configuration_plan_and_prices_from_the_quote(self, catalog, people):
        quote = make_quote(people.acme, by=people.alice, node_count=2, storage="minio", storage_tb=5)
        order = order_place(quote=quote, by=people.alice)
        assert order.state == OrderState.DRAFT
        assert (order.sku, order.node_count, order.nvme, order.network) == (
            quote.sku, 2, quote.nvme, quote.network)
        assert (order.storage_provider, order.storage_tb) == (quote.storage_provider, 5)
        assert order.plan == quote.plan and order.price_lines == quote.price_lines
        assert (order.price_hourly, order.price_monthly) == (quote.price_hourly, quote.price_monthly)
        assert order.organisation == people.acme and order.placed_by == people.alice
        assert order.events.get().note == f"placed from quote {quote.reference}"

    def test_a_quote_with_a_live_order_is_not_ordered_again(self, catalog, people):
        quote = make_quote(people.acme, by=people.alice)
        first = order_place(quote=quote, by=people.alice)
        with pytest.raises(QuoteAlreadyOrdered, match=f"already ordered as {first.reference}"):
            order_place(quote=quote, by=people.alice)
        order_cancel(order=first, by=people.alice)
        assert order_place(quote=quote, by=people.alice).pk != first.pk  # cancelled: may re-order

    def test_it_refuses_an_expired_quote(self, catalog, people):
        quote = make_quote(people.acme, valid_days=-1)
        with pytest.raises(DomainError, match=f"Quote {quote.reference} expired on"):
            order_place(quote=quote, by=people.alice)

    def test_it_refuses_a_quote_of_another_organisation(self, catalog, people):
        quote = make_quote(people.outsider_org)
        with pytest.raises(DomainError, match="belongs to another organisation"):
            order_place(quote=quote, by=people.alice)
        with pytest.raises(DomainError, match="belongs to another organisation"):
            order_place(quote=make_quote(people.acme), by=people.alice,
                        organisation=people.outsider_org)

    def test_a_reseller_admin_orders_for_its_customer(self, catalog, people):
        order = order_place(quote=make_quote(people.client_org), by=people.rita)
        assert order.organisation == people.client_org


class TestApprovalPolicy:
    def test_manual_sku_waits_for_staff(self, catalog, people, sim_dir, mailoutbox,
                                        django_capture_on_commit_callbacks):
        make_node(sku=H100_SKU, state_dir=sim_dir)
        with django_capture_on_commit_callbacks(execute=True):
            order = _submitted(people)
        assert order.state == OrderState.PENDING_APPROVAL
        assert [e.to_state for e in order.events.all()] == ["draft", "submitted", "pending_approval"]
        assert [m.subject.split(": ")[1] for m in mailoutbox] == ["Submitted", "Pending approval"]

    def test_auto_small_approves_a_single_node_order_of_an_existing_customer(
            self, catalog, people, sim_dir):
        _auto_small()
        _make_existing_customer(people.acme)
        node = make_node(sku=L4_SKU, state_dir=sim_dir)
        order = _submitted(people, sku=L4_SKU, network="eth-10g")
        assert order.state == OrderState.APPROVED
        approve = order.events.get(to_state="approved")
        assert approve.actor is None and approve.note.startswith("approved automatically")
        node.refresh_from_db()
        assert (node.state, node.order) == (NodeState.RESERVED, order)

    @pytest.mark.parametrize(("quote_kwargs", "existing", "reason"), [
        ({"node_count": 2}, True, "Multi-node orders are always approved by staff."),
        ({"network": "ib-ndr-400g"}, True, "InfiniBand orders need a staff check of the fabric."),
        ({}, False, "A new customer's first order is approved by staff."),
    ])
    def test_auto_small_stays_manual_for(self, catalog, people, sim_dir, quote_kwargs, existing,
                                         reason):
        _auto_small()
        if existing:
            _make_existing_customer(people.acme)
        make_node(sku=L4_SKU, state_dir=sim_dir, fabric_group="a")
        make_node(sku=L4_SKU, state_dir=sim_dir, fabric_group="a")
        order = _submitted(people, **{"sku": L4_SKU, "network": "eth-10g", **quote_kwargs})
        assert order.state == OrderState.PENDING_APPROVAL
        assert order.events.get(to_state="pending_approval").note == reason

    def test_auto_approval_without_stock_leaves_the_order_in_the_queue(self, catalog, people):
        _auto_small()
        _make_existing_customer(people.acme)
        order = _submitted(people, sku=L4_SKU, network="eth-10g")
        assert order.state == OrderState.PENDING_APPROVAL
        assert "automatic approval skipped: No ready node of 1× L4 (PCIe)" in \
            order.events.get(transition="auto_approval_skipped").note


class TestApprove:
    def test_customers_cannot_approve_or_reject(self, catalog, people, sim_dir):
        make_node(sku=H100_SKU, state_dir=sim_dir)
        order = _submitted(people)
        for user in (people.alice, people.rita, people.olga):
            with pytest.raises(PermissionDenied):
                order_approve(order=order, by=user)
            with pytest.raises(PermissionDenied):
                order_reject(order=order, by=user, reason="no")
        order.refresh_from_db()
        assert order.state == OrderState.PENDING_APPROVAL

    def test_it_reserves_suggested_nodes_and_creates_the_run(self, catalog, people, sim_dir):
        node = make_node(sku=H100_SKU, state_dir=sim_dir)
        order = order_approve(order=_submitted(people), by=people.sam, note="looks good")
        assert order.state == OrderState.APPROVED and order.approved_by == people.sam
        node.refresh_from_db()
        assert (node.state, node.order_id) == (NodeState.RESERVED, order.pk)
        assert node.reserved_until > timezone.now()
        run = order.runs.get()
        assert run.status == RunStatus.PENDING
        assert list(run.steps.values_list("step", flat=True)) == [
            "reserve", "deploy_os", "configure", "storage", "stack", "acceptance", "handover"]
        assert order.events.get(to_state="approved").note == f"looks good; nodes: {node.hostname}"

    def test_staff_may_pick_other_nodes(self, catalog, people, sim_dir):
        make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-a")
        picked = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-b")
        order = order_approve(order=_submitted(people), by=people.sam, node_ids=[picked.pk])
        assert list(Node.objects.filter(order=order)) == [picked]

    def test_a_picked_node_of_another_sku_is_refused(self, catalog, people, sim_dir):
        wrong = make_node(sku=L4_SKU, state_dir=sim_dir)
        order = _submitted(people)
        with pytest.raises(DomainError, match=f"{wrong.hostname} is a 1× L4"):
            order_approve(order=order, by=people.sam, node_ids=[wrong.pk])
        order.refresh_from_db()
        assert order.state == OrderState.PENDING_APPROVAL

    def test_a_cluster_gets_all_nodes_from_one_fabric_group(self, catalog, people, sim_dir):
        make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="big")
        for _ in range(3):
            make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="big")
        small = [make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="small") for _ in range(2)]
        make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="odd")
        order = order_approve(order=_submitted(people, node_count=2), by=people.sam)
        assert set(Node.objects.filter(order=order)) == set(small)  # the smallest group that fits

    def test_a_cluster_without_a_fitting_fabric_group_is_refused_whole(self, catalog, people, sim_dir):
        nodes = [make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group=g) for g in "abc"]
        order = _submitted(people, node_count=2)
        expected = (r"No fabric group has 2 ready nodes of 8× H100 SXM5 80GB \(NVSwitch\) "
                    r"together \(largest: 1\)")
        with pytest.raises(OutOfStock, match=expected):
            order_approve(order=order, by=people.sam)
        assert {n.state for n in Node.objects.filter(pk__in=[n.pk for n in nodes])} == {"ready"}
        assert not ProvisioningRun.objects.exists()

    def test_out_of_stock_says_how_many_are_left(self, catalog, people, sim_dir):
        make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="a")
        order = _submitted(people, node_count=2)
        with pytest.raises(OutOfStock) as exc:
            order_approve(order=order, by=people.sam)
        assert str(exc.value) == "Only 1 ready node of 8× H100 SXM5 80GB (NVSwitch); this order needs 2."
        item = approval_queue()[0]
        assert (item.ready_nodes, item.suggested, item.stock_problem) == (1, (), str(exc.value))

    def test_the_queue_shows_fit_stock_and_suggestions(self, catalog, people, sim_dir):
        node = make_node(sku=H100_SKU, state_dir=sim_dir)
        order = _submitted(people)
        [item] = approval_queue()
        assert item.order == order and item.suggested == (node,) and item.ready_nodes == 1
        assert item.fit.fits is True and "12.0 GB headroom" in item.fit.summary
        assert item.decision.automatic is False


class TestRejectCancelTerminate:
    def test_reject_needs_a_reason_the_customer_sees(self, catalog, people, mailoutbox,
                                                    django_capture_on_commit_callbacks):
        order = _submitted(people)
        with pytest.raises(DomainError, match="reason"):
            order_reject(order=order, by=people.sam, reason="  ")
        with django_capture_on_commit_callbacks(execute=True):
            order_reject(order=order, by=people.sam, reason="We cannot host InfiniBand yet.")
        assert order.state == OrderState.REJECTED
        assert order.rejection_reason == "We cannot host InfiniBand yet."
        assert "We cannot host InfiniBand yet." in mailoutbox[-1].body

    def test_cancel_gives_reserved_nodes_back(self, catalog, people, sim_dir):
        node = make_node(sku=H100_SKU, state_dir=sim_dir)
        order = order_approve(order=_submitted(people), by=people.sam)
        order_cancel(order=order, by=people.alice, reason="changed plans")
        node.refresh_from_db()
        assert (order.state, node.state, node.order) == (OrderState.CANCELLED, "ready", None)
        assert order.runs.get().status == RunStatus.CANCELLED

    def test_an_outsider_cannot_cancel(self, catalog, people):
        order = _submitted(people)
        with pytest.raises(PermissionDenied):
            order_cancel(order=order, by=people.charlie)

    def test_cancel_is_refused_once_provisioning_started(self, catalog, people):
        order = make_order(people.acme, state=OrderState.PROVISIONING)
        with pytest.raises(DomainError, match="Cannot cancel order"):
            order_cancel(order=order, by=people.alice)

    def test_termination_of_an_order_without_nodes_finishes_at_once(self, catalog, people):
        order = make_order(people.acme, state=OrderState.PROVISION_FAILED)
        order_request_termination(order=order, by=people.alice)
        assert order.state == OrderState.TERMINATED


class TestReservationExpiry:
    def test_an_order_that_does_not_move_on_loses_its_nodes(self, catalog, people, sim_dir):
        node = make_node(sku=H100_SKU, state_dir=sim_dir)
        order = order_approve(order=_submitted(people), by=people.sam)
        assert reservations_expire() == []
        later = timezone.now() + timedelta(hours=2)
        assert reservations_expire(now=later) == [order.reference]
        order.refresh_from_db()
        node.refresh_from_db()
        assert (order.state, node.state, node.order) == (OrderState.PENDING_APPROVAL, "ready", None)
        assert order.runs.get().status == RunStatus.CANCELLED
        # and it can be approved again
        order_approve(order=order, by=people.sam)



class TestCustomerEmails:
    """Order e-mails go to the customer: no node hostnames, no staff notes (review 4)."""

    def test_the_approval_mail_names_no_node_and_no_staff_note(
            self, catalog, people, sim_dir, mailoutbox, django_capture_on_commit_callbacks):
        make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-rack7-u12")
        order = _submitted(people)
        with django_capture_on_commit_callbacks(execute=True):
            order_approve(order=order, by=people.sam, note="new customer, watch the first invoice")
        approved = [m for m in mailoutbox if m.subject.endswith(": Approved")]
        assert len(approved) == 1
        body = approved[0].body
        assert "servers are reserved for you" in body
        assert "gpu-rack7-u12" not in body and "watch the first invoice" not in body
        assert "gpu-rack7-u12" in order.events.get(to_state="approved").note  # staff still see it

    def test_the_reservation_expiry_mail_says_it_in_customer_words(
            self, catalog, people, sim_dir, mailoutbox, django_capture_on_commit_callbacks):
        make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-rack7-u13")
        order = order_approve(order=_submitted(people), by=people.sam)
        mailoutbox.clear()
        with django_capture_on_commit_callbacks(execute=True):
            assert reservations_expire(now=timezone.now() + timedelta(hours=2)) == [order.reference]
        assert len(mailoutbox) == 1
        body = mailoutbox[0].body
        assert "went back to stock because setup did not start in time" in body
        assert "approve again" not in body and "gpu-rack7-u13" not in body
        assert order.events.get(transition="expire_reservation").note.endswith("approve again.")

    def test_the_rejection_reason_is_for_the_customer(
            self, catalog, people, mailoutbox, django_capture_on_commit_callbacks):
        order = _submitted(people)
        with django_capture_on_commit_callbacks(execute=True):
            order_reject(order=order, by=people.sam, reason="No InfiniBand capacity until March.")
        assert "Reason: No InfiniBand capacity until March." in mailoutbox[-1].body


class TestTenancy:
    def test_orders_for_scopes_by_organisation(self, catalog, people):
        mine = make_order(people.acme)
        theirs = make_order(people.outsider_org)
        client = make_order(people.client_org)
        assert set(orders_for(people.alice)) == {mine}
        assert set(orders_for(people.charlie)) == {theirs}
        assert set(orders_for(people.rita)) == {client}
        assert set(orders_for(people.sam)) == {mine, theirs, client}
