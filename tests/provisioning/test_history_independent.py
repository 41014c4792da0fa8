"""Staff pages whose cost does not grow with history: the approval queue, the inventory and the
node page run the same number of queries with a little data and with much more of it; a node's
health is kept on its row, written with each check, never read back from its checks."""

import importlib

from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.orders import services as order_services
from provisioning.fulfilment import orders as fulfilment
from provisioning.models import HealthCheck, Node, NodeEvent
from provisioning.monitoring.health import node_health_check
from provisioning.states import NodeState
from tests.factories import H100_SKU, L4_SKU, make_node, make_quote


def _queries(client, url: str) -> tuple[int, str, list[str]]:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(ctx), response.content.decode(), [q["sql"] for q in ctx.captured_queries]


def _queue(people, n: int, **quote_kwargs):
    return [fulfilment.order_submit(order=order_services.order_place(
        quote=make_quote(people.acme, by=people.alice, **quote_kwargs), by=people.alice),
        by=people.alice) for _ in range(n)]


def _checks(node, n: int, *, ok: bool = True):
    HealthCheck.objects.bulk_create(HealthCheck(node=node, ok=ok, expected_gpu_count=8)
                                    for _ in range(n))


# --- approval queue ----------------------------------------------------------------------------
def test_the_approval_queue_runs_the_same_queries_for_2_and_10_orders(login, people, catalog,
                                                                      sim_dir):
    client = login(people.sam)
    make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="a")
    make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="a")
    _queue(people, 1)
    _queue(people, 1, node_count=2)
    small, html, _ = _queries(client, "/ops/approvals/")
    assert html.count("Approving takes") == 2

    for i in range(30):
        make_node(sku=H100_SKU if i % 2 else L4_SKU, state_dir=sim_dir, fabric_group="ab"[i % 3 % 2])
    _queue(people, 4)
    _queue(people, 2, node_count=2)
    _queue(people, 2, sku=L4_SKU, network="eth-10g")
    large, html, _ = _queries(client, "/ops/approvals/")
    assert html.count('class="card queue-item"') == 10 and "Choose nodes" in html
    assert html.count("Approving takes") == 10
    assert large == small


def test_the_queue_suggests_what_approval_takes(people, catalog, sim_dir):
    from provisioning.fulfilment.approvals import approval_queue_items, approval_queue_orders, order_approve

    make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="big")
    for _ in range(2):
        make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="big")
    small = [make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="small") for _ in range(2)]
    [single] = _queue(people, 1)
    [cluster] = _queue(people, 1, node_count=2)
    items = {item.order.pk: item for item in approval_queue_items(approval_queue_orders())}
    assert items[cluster.pk].suggested == tuple(small)  # the smallest group that fits
    first = Node.objects.filter(state=NodeState.READY).order_by("hostname").first()
    assert items[single.pk].suggested == (first,)
    order_approve(order=cluster, by=people.sam)
    assert set(Node.objects.filter(order=cluster)) == set(small)


# --- inventory and node page -------------------------------------------------------------------
def test_the_inventory_runs_the_same_queries_however_many_checks(login, people, catalog, sim_dir):
    client = login(people.olga)
    nodes = [make_node(sku=H100_SKU, state_dir=sim_dir, state=NodeState.ACTIVE) for _ in range(3)]
    small, _, _ = _queries(client, "/ops/nodes/")
    for node in nodes:
        _checks(node, 40)
    nodes += [make_node(sku=L4_SKU, state_dir=sim_dir) for _ in range(60)]
    large, html, sqls = _queries(client, "/ops/nodes/")
    assert large == small
    assert not any("provisioning_healthcheck" in sql for sql in sqls)
    assert html.count('data-label="Hostname"') == 50  # one page
    filtered, html, _ = _queries(client, "/ops/nodes/?state=active&q=gpu")
    assert filtered == small and html.count("badge-active") == 3


def test_the_inventory_flags_a_node_whose_latest_check_failed(login, people, catalog, sim_dir):
    sick = make_node(sku=H100_SKU, state_dir=sim_dir, state=NodeState.ACTIVE, gpu_count=7,
                     hostname="gpu-sick")
    make_node(sku=H100_SKU, state_dir=sim_dir, state=NodeState.ACTIVE, hostname="gpu-fine")
    node_health_check(node=sick)
    node_health_check(node=sick)
    html = login(people.olga).get("/ops/nodes/").content.decode()
    assert html.count("badge badge-warn") == 1
    assert "The latest health check failed (2 in a row)" in html


def test_the_node_page_shows_the_latest_events_and_pages_to_older(login, people, catalog, sim_dir):
    client = login(people.olga)
    node = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-old")
    small, _, _ = _queries(client, f"/ops/nodes/{node.pk}/")
    NodeEvent.objects.bulk_create(
        NodeEvent(node=node, transition="note", from_state="ready", to_state="ready",
                  note=f"event {i:02}") for i in range(60))
    _checks(node, 50)
    large, html, _ = _queries(client, f"/ops/nodes/{node.pk}/")
    assert large == small
    assert "event 59" in html and "event 35" in html and "event 34" not in html  # newest 25
    older = html.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0].replace("&amp;", "&")
    second = client.get(f"/ops/nodes/{node.pk}/{older}").content.decode()
    assert "event 34" in second and "event 10" in second and "event 35" not in second
    assert "Newest" in second


# --- health on the node row --------------------------------------------------------------------
def test_a_health_check_keeps_the_latest_health_on_the_node_without_reading_checks(catalog, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, state=NodeState.ACTIVE, gpu_count=7)
    _checks(node, 30)
    with CaptureQueriesContext(connection) as ctx:
        check = node_health_check(node=node)
    assert not any("provisioning_healthcheck" in q["sql"] and q["sql"].lstrip().startswith("SELECT")
                   for q in ctx.captured_queries)
    node.refresh_from_db()
    assert (node.health_ok, node.health_checked_at, node.health_failures) == (False, check.at, 1)
    node_health_check(node=node)
    node.refresh_from_db()
    assert node.health_failures == 2
    Node.objects.filter(pk=node.pk).update(driver_options={**node.driver_options, "gpu_count": 8})
    node_health_check(node=node)
    node.refresh_from_db()
    assert (node.health_ok, node.health_failures) == (True, 0)


def test_the_migration_fills_health_from_existing_checks(catalog, sim_dir):
    fill = importlib.import_module(
        "provisioning.migrations.0014_node_health_on_row").fill_health_from_checks
    flaky = make_node(sku=H100_SKU, state_dir=sim_dir)
    fine = make_node(sku=H100_SKU, state_dir=sim_dir)
    unchecked = make_node(sku=H100_SKU, state_dir=sim_dir)
    for node, results in ((flaky, [False, True, False, False]), (fine, [False, True])):
        for ok in results:  # one by one: each its own time
            HealthCheck.objects.create(node=node, ok=ok, expected_gpu_count=8)
    fill(apps, None)
    got = {n.pk: (n.health_ok, n.health_failures, n.health_checked_at is not None)
           for n in Node.objects.all()}
    assert got[flaky.pk] == (False, 2, True)
    assert got[fine.pk] == (True, 0, True)
    assert got[unchecked.pk] == (None, 0, False)
