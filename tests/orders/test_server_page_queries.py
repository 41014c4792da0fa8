"""The server page's cost does not grow with the order's cluster: the same bounded number of
queries for one node and for a cluster of three (issue 27: ≤ 20 whatever the data)."""

from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.orders import services as order_services
from portal.orders.states import OrderState
from provisioning.fulfilment import approvals
from provisioning.fulfilment import orders as fulfilment
from tests.factories import H100_SKU, drain, make_node, make_quote


def _active(people, sim_dir, nodes: int):
    for i in range(nodes):
        make_node(sku=H100_SKU, state_dir=sim_dir, hostname=f"gpu-h100-c{nodes}{i}",
                  fabric_group=f"rack-{nodes}")
    quote = make_quote(people.acme, by=people.alice, node_count=nodes, network="ib-ndr-400g"
                       if nodes > 1 else "eth-100g")
    order = fulfilment.order_submit(order=order_services.order_place(quote=quote, by=people.alice),
                                    by=people.alice)
    approvals.order_approve(order=order, by=people.sam)
    drain(order.runs.get().pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    return order


def _queries(client, order) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(f"/orders/{order.reference}/server/")
    assert response.status_code == 200
    return len(ctx.captured_queries)


def test_the_server_page_reads_as_many_queries_for_a_cluster_as_for_one_node(
        client, people, catalog, sim_dir):
    client.force_login(people.alice)
    one, three = _active(people, sim_dir, 1), _active(people, sim_dir, 3)
    assert _queries(client, one) == _queries(client, three) <= 20
