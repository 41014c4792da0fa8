"""Fixtures of the order pages: alice's order placed from a sized quote, and the same order
provisioned to active on a simulated node."""

import pytest

from portal.orders import services as order_services
from portal.orders.states import OrderState
from provisioning.fulfilment import approvals
from provisioning.fulfilment import orders as fulfilment
from tests.factories import H100_SKU, SIZED_PLAN, drain, make_node, make_quote


@pytest.fixture
def placed(people, catalog):
    """A pending order of alice's organisation, placed through the services."""
    quote = make_quote(people.acme, by=people.alice, plan=SIZED_PLAN)
    order = order_services.order_place(quote=quote, by=people.alice)
    return fulfilment.order_submit(order=order, by=people.alice)


@pytest.fixture
def active(people, catalog, sim_dir, placed):
    make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-h100-a01")
    approvals.order_approve(order=placed, by=people.sam)
    drain(placed.runs.get().pk)
    placed.refresh_from_db()
    assert placed.state == OrderState.ACTIVE
    return placed
