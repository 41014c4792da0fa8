"""Every query of the main pages and API reads, EXPLAINed on a filled PostgreSQL database: none
reads a big table whole (a Seq Scan), so lists filter and sort by index whatever the history.

The database is filled in bulk (``bench/scale_fill.py``: tens of thousands of orders, a hundred
thousand health checks) and ANALYZEd so the planner knows the sizes; the pages are requested as
each kind of user (customer, reseller, approver, operator, reseller API key), the queries they
run captured and each one EXPLAINed. No time is measured.
"""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from bench.scale_fill import Sizes, fill
from portal.accounts.services import api_key_issue
from portal.orders.models import Order
from portal.orders.states import OrderState
from provisioning.inventory.selectors import nodes_for_operator
from provisioning.models import Node
from tests.factories import verified_login

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="plans of PostgreSQL")

# Tables that grow with history: a full read of one is what this test is here to catch. Nodes,
# SKUs and organisations are bounded by the fleet and the customers (the stock summary counts
# every node on purpose).
BIG_TABLES = ("orders_order", "orders_orderevent", "orders_quote", "provisioning_healthcheck",
              "provisioning_nodeevent", "provisioning_provisioningrun", "provisioning_steprun",
              "provisioning_steplogline")
SIZES = Sizes(organisations=300, orders=20_000, nodes=1_000, health_checks=150_000, quotes=8_000,
              events_per_order=3, runs_per_order=1.0, steps_per_run=2, log_lines_per_step=1,
              events_per_node=30, pending_orders=30)


def _seq_scans(sql: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return [t for t in BIG_TABLES if re.search(rf"Seq Scan on {t}\b", plan)]


def _plans_of(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    problems = []
    for query in ctx.captured_queries:
        sql = query["sql"]
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        if scans := _seq_scans(sql):
            problems.append(f"{url}: Seq Scan on {', '.join(scans)}: {sql[:300]}")
    return problems


def test_every_list_reads_by_index_on_a_filled_database(client, people, catalog):
    with connection.cursor() as cursor:
        fill(cursor, SIZES, reseller_id=people.reseller.pk)
    alice_order = Order.objects.filter(organisation=people.acme).order_by("-created_at").first()
    pending = Order.objects.filter(state=OrderState.PENDING_APPROVAL).order_by("state_changed_at").first()
    node = Node.objects.filter(hostname__startswith="scale-gpu-").order_by("pk")[500]
    key = api_key_issue(organisation=people.reseller, name="plans", scopes=["read"])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {key.plaintext}")

    pages = {
        people.alice: ["/", "/orders/", f"/orders/{alice_order.reference}/"],
        people.rita: ["/", "/orders/"],
        people.sam: ["/", "/ops/approvals/", f"/ops/approvals/{pending.reference}/nodes/",
                     "/orders/", f"/orders/{pending.reference}/"],
        people.olga: ["/", "/ops/nodes/", "/ops/nodes/?state=ready", "/ops/nodes/?q=scale-gpu-0042",
                      f"/ops/nodes/{node.pk}/"],
    }
    problems = []
    for user, urls in pages.items():
        verified_login(client, user)
        for url in urls:
            problems += _plans_of(client, url)
    # an older page of the lists: the keyset reads from the cursor on
    verified_login(client, people.sam)
    older = client.get("/orders/").content.decode().split('rel="next"')[0].rsplit("older=", 1)[1]
    problems += _plans_of(client, "/orders/?older=" + older.split('"')[0])
    for url in ("/api/v1/orders", "/api/v1/quotes"):
        problems += _plans_of(api, url)
    assert problems == []
    assert _search_joins_every_sku() == []


def _search_joins_every_sku() -> list[str]:
    """The inventory search tests each node's own row (SKUs and the order by subquery); tested on
    the node × SKU join it read 150,000 pairs at 5,000 nodes."""
    sql, params = nodes_for_operator(search="scale-gpu-0042")[:50].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = [row[0] for row in cursor.fetchall()]
    return [line for line in plan if "Join Filter" in line and "hostname" in line]
