"""Cancelling and terminating orders: reserved nodes go back, open runs stop."""


import pytest
from django.core.exceptions import PermissionDenied

from portal.core.states import DomainError
from portal.orders.states import OrderState
from provisioning.fulfilment.approvals import order_approve
from provisioning.fulfilment.orders import order_cancel, order_request_termination
from provisioning.states import RunStatus
from tests.factories import H100_SKU, make_node, make_order, submitted_order


class TestCancelAndTerminate:
    def test_cancel_gives_reserved_nodes_back(self, catalog, people, sim_dir):
        node = make_node(sku=H100_SKU, state_dir=sim_dir)
        order = order_approve(order=submitted_order(people), by=people.sam)
        order_cancel(order=order, by=people.alice, reason="changed plans")
        node.refresh_from_db()
        assert (order.state, node.state, node.order) == (OrderState.CANCELLED, "ready", None)
        assert order.runs.get().status == RunStatus.CANCELLED

    def test_an_outsider_cannot_cancel(self, catalog, people):
        order = submitted_order(people)
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
