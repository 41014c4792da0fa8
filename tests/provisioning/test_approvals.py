"""The approval policy, staff approval and rejection, and reservations that expire."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from portal.catalog.models import ServerSKU
from portal.core.states import DomainError
from portal.orders.models import OrderEvent
from portal.orders.states import OrderState
from provisioning.fulfilment.approvals import (
    approval_queue_items,
    approval_queue_orders,
    order_approve,
    order_reject,
)
from provisioning.inventory.allocation import OutOfStock, reservations_expire
from provisioning.models import Node, ProvisioningRun
from provisioning.states import NodeState, RunStatus
from tests.factories import H100_SKU, L4_SKU, make_node, make_order, submitted_order


def _auto_small(slug=L4_SKU):
    ServerSKU.objects.filter(slug=slug).update(approval_policy=ServerSKU.ApprovalPolicy.AUTO_SMALL)


def _make_existing_customer(org):
    earlier = make_order(org, state=OrderState.VERIFYING)
    OrderEvent.objects.create(order=earlier, transition="activate", from_state="verifying",
                              to_state="active")


class TestApprovalPolicy:
    def test_manual_sku_waits_for_staff(self, emails_inline, catalog, people, sim_dir, mailoutbox,
                                        django_capture_on_commit_callbacks):
        make_node(sku=H100_SKU, state_dir=sim_dir)
        with django_capture_on_commit_callbacks(execute=True):
            order = submitted_order(people)
        assert order.state == OrderState.PENDING_APPROVAL
        assert [e.to_state for e in order.events.all()] == ["draft", "submitted", "pending_approval"]
        assert [m.subject.split(": ")[1] for m in mailoutbox] == ["Pending approval"]  # one mail

    def test_auto_small_approves_a_single_node_order_of_an_existing_customer(
            self, catalog, people, sim_dir):
        _auto_small()
        _make_existing_customer(people.acme)
        node = make_node(sku=L4_SKU, state_dir=sim_dir)
        order = submitted_order(people, sku=L4_SKU, network="eth-10g")
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
        order = submitted_order(people, **{"sku": L4_SKU, "network": "eth-10g", **quote_kwargs})
        assert order.state == OrderState.PENDING_APPROVAL
        assert order.events.get(to_state="pending_approval").note == reason

    def test_auto_approval_without_stock_leaves_the_order_in_the_queue(self, catalog, people):
        _auto_small()
        _make_existing_customer(people.acme)
        order = submitted_order(people, sku=L4_SKU, network="eth-10g")
        assert order.state == OrderState.PENDING_APPROVAL
        assert "automatic approval skipped: No ready node of 1× L4 (PCIe)" in \
            order.events.get(transition="auto_approval_skipped").note


class TestApprove:
    def test_customers_cannot_approve_or_reject(self, catalog, people, sim_dir):
        make_node(sku=H100_SKU, state_dir=sim_dir)
        order = submitted_order(people)
        for user in (people.alice, people.rita, people.olga):
            with pytest.raises(PermissionDenied):
                order_approve(order=order, by=user)
            with pytest.raises(PermissionDenied):
                order_reject(order=order, by=user, reason="no")
        order.refresh_from_db()
        assert order.state == OrderState.PENDING_APPROVAL

    def test_it_reserves_suggested_nodes_and_creates_the_run(self, catalog, people, sim_dir):
        node = make_node(sku=H100_SKU, state_dir=sim_dir)
        order = order_approve(order=submitted_order(people), by=people.sam, note="looks good")
        assert order.state == OrderState.APPROVED and order.approved_by == people.sam
        node.refresh_from_db()
        assert (node.state, node.order_id) == (NodeState.RESERVED, order.pk)
        assert node.reserved_until > timezone.now()
        run = order.runs.get()
        assert run.status == RunStatus.PENDING
        assert list(run.steps.values_list("step", flat=True)) == [
            "reserve", "deploy_os", "configure", "storage", "stack", "access", "acceptance",
            "handover"]
        assert order.events.get(to_state="approved").note == f"looks good; nodes: {node.hostname}"

    def test_staff_may_pick_other_nodes(self, catalog, people, sim_dir):
        make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-a")
        picked = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-b")
        order = order_approve(order=submitted_order(people), by=people.sam, node_ids=[picked.pk])
        assert list(Node.objects.filter(order=order)) == [picked]

    def test_a_picked_node_of_another_sku_is_refused(self, catalog, people, sim_dir):
        wrong = make_node(sku=L4_SKU, state_dir=sim_dir)
        order = submitted_order(people)
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
        order = order_approve(order=submitted_order(people, node_count=2), by=people.sam)
        assert set(Node.objects.filter(order=order)) == set(small)  # the smallest group that fits

    def test_a_cluster_without_a_fitting_fabric_group_is_refused_whole(self, catalog, people, sim_dir):
        nodes = [make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group=g) for g in "abc"]
        order = submitted_order(people, node_count=2)
        expected = (r"No fabric group has 2 ready nodes of 8× H100 SXM5 80GB \(NVSwitch\) "
                    r"together \(largest: 1\)")
        with pytest.raises(OutOfStock, match=expected):
            order_approve(order=order, by=people.sam)
        assert {n.state for n in Node.objects.filter(pk__in=[n.pk for n in nodes])} == {"ready"}
        assert not ProvisioningRun.objects.exists()

    def test_out_of_stock_says_how_many_are_left(self, catalog, people, sim_dir):
        make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="a")
        order = submitted_order(people, node_count=2)
        with pytest.raises(OutOfStock) as exc:
            order_approve(order=order, by=people.sam)
        assert str(exc.value) == "Only 1 ready node of 8× H100 SXM5 80GB (NVSwitch); this order needs 2."
        item = approval_queue_items(approval_queue_orders())[0]
        assert (item.ready_nodes, item.suggested, item.stock_problem) == (1, (), str(exc.value))

    def test_the_queue_shows_fit_stock_and_suggestions(self, catalog, people, sim_dir):
        node = make_node(sku=H100_SKU, state_dir=sim_dir)
        order = submitted_order(people)
        [item] = approval_queue_items(approval_queue_orders())
        assert item.order == order and item.suggested == (node,) and item.ready_nodes == 1
        assert item.fit.fits is True and "12.0 GB headroom" in item.fit.summary
        assert item.decision.automatic is False


class TestReject:
    def test_reject_needs_a_reason_the_customer_sees(self, emails_inline, catalog, people, mailoutbox,
                                                    django_capture_on_commit_callbacks):
        order = submitted_order(people)
        with pytest.raises(DomainError, match="reason"):
            order_reject(order=order, by=people.sam, reason="  ")
        with django_capture_on_commit_callbacks(execute=True):
            order_reject(order=order, by=people.sam, reason="We cannot host InfiniBand yet.")
        assert order.state == OrderState.REJECTED
        assert order.rejection_reason == "We cannot host InfiniBand yet."
        assert "We cannot host InfiniBand yet." in mailoutbox[-1].body


class TestReservationExpiry:
    def test_an_order_that_does_not_move_on_loses_its_nodes(self, catalog, people, sim_dir):
        node = make_node(sku=H100_SKU, state_dir=sim_dir)
        order = order_approve(order=submitted_order(people), by=people.sam)
        assert reservations_expire() == []
        later = timezone.now() + timedelta(hours=2)
        assert reservations_expire(now=later) == [order.reference]
        order.refresh_from_db()
        node.refresh_from_db()
        assert (order.state, node.state, node.order) == (OrderState.PENDING_APPROVAL, "ready", None)
        assert order.runs.get().status == RunStatus.CANCELLED
        # and it can be approved again
        order_approve(order=order, by=people.sam)
