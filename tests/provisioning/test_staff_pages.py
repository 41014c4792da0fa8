"""Staff pages under /ops/: approval queue, run step log (retry, swap), node inventory.

Customers and outsiders get 404 on all of them; bad input gets an inline error and changes nothing.
"""

import pytest

from portal.orders import services as order_services
from portal.orders.states import OrderState
from provisioning.fulfilment import approvals
from provisioning.fulfilment import orders as fulfilment
from provisioning.models import Node, NodeEvent
from provisioning.states import STEPS, NodeState, RunKind, RunStatus, StepStatus
from provisioning.tasks import node_accept_check_task
from tests.factories import H100_SKU, L4_SKU, drain, make_node, make_quote

A100_SKU = "4x-a100-sxm-80gb"


@pytest.fixture
def pending(people, catalog):
    quote = make_quote(people.acme, by=people.alice, plan={
        "model": "llama-3.1-8b", "sku": H100_SKU, "nodes": 1, "gpus_per_node": 8,
        "per_gpu_total_bytes": 61_400_000_000, "gpu_memory_bytes": 80_000_000_000,
        "headroom_bytes": 14_600_000_000})
    return fulfilment.order_submit(order=order_services.order_place(quote=quote, by=people.alice),
                                 by=people.alice)


@pytest.fixture
def stock(catalog, sim_dir):
    return [make_node(sku=H100_SKU, state_dir=sim_dir, hostname=f"gpu-h100-a0{i}") for i in (1, 2)]


@pytest.fixture
def failed_run(people, pending, sim_dir):
    """A provisioning run whose deploy step failed for good on gpu-bad."""
    make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-bad",
              fail={"deploy_os": {"permanent": "image checksum mismatch"}})
    approvals.order_approve(order=pending, by=people.sam)
    run = pending.runs.get()
    drain(run.pk)
    run.refresh_from_db()
    pending.refresh_from_db()
    assert run.status == RunStatus.FAILED and pending.state == OrderState.PROVISION_FAILED
    return run


# --- access ------------------------------------------------------------------------------------
STAFF_GETS = ["/ops/approvals/", "/ops/nodes/", "/ops/nodes/enrol/"]


@pytest.mark.parametrize("url", STAFF_GETS)
def test_customers_get_404_on_staff_pages(login, people, catalog, url):
    assert login(people.alice).get(url).status_code == 404


def test_anonymous_visitors_are_sent_to_log_in(client, catalog):
    response = client.get("/ops/approvals/")
    assert response.status_code == 302 and "/accounts/login/" in response.url


def test_customers_cannot_approve_or_reject(login, people, pending, stock):
    client = login(people.alice)
    prefix = f"approve-{pending.pk}"
    assert client.post(f"/ops/approvals/{pending.reference}/approve/",
                       {f"{prefix}-nodes": [stock[0].pk]}).status_code == 404
    assert client.post(f"/ops/approvals/{pending.reference}/reject/",
                       {f"reject-{pending.pk}-reason": "no"}).status_code == 404
    pending.refresh_from_db()
    assert pending.state == OrderState.PENDING_APPROVAL


def test_an_operator_is_not_an_approver(login, people, pending):
    response = login(people.olga).get("/ops/approvals/")
    assert response.status_code == 403
    assert "This page is for staff approvers. Your role is operator" in response.content.decode()


def test_customers_and_outsiders_get_404_on_runs_and_nodes(login, people, failed_run):
    node = Node.objects.get(hostname="gpu-bad")
    for user in (people.alice, people.charlie):
        client = login(user)
        assert client.get(f"/ops/runs/{failed_run.pk}/").status_code == 404
        assert client.get(f"/ops/runs/{failed_run.pk}/steps/").status_code == 404
        assert client.post(f"/ops/runs/{failed_run.pk}/retry/").status_code == 404
        assert client.post(f"/ops/runs/{failed_run.pk}/swap/", {"node": node.pk}).status_code == 404
        assert client.get(f"/ops/nodes/{node.pk}/").status_code == 404
        assert client.post(f"/ops/nodes/{node.pk}/enter_maintenance/").status_code == 404
    node.refresh_from_db()
    assert node.state == NodeState.FAILED_DEPLOY


# --- the approval queue ------------------------------------------------------------------------
def test_the_queue_shows_customer_configuration_fit_stock_and_price(login, people, pending, stock):
    response = login(people.sam).get("/ops/approvals/")
    html = response.content.decode()
    assert response.status_code == 200
    assert pending.reference in html and "Acme AI" in html
    assert "8× NVIDIA H100 SXM5 80GB" in html and "per month" in html
    assert "Fits:" in html and "61.4 GB of 80.0 GB per GPU" in html
    assert "2 ready" in html and "this order needs 1" in html
    assert "Approving takes <strong>gpu-h100-a01</strong>" in html and "suggested" in html
    assert f'name="approve-{pending.pk}-nodes"' not in html  # node choice opens on demand
    assert f'hx-get="/ops/approvals/{pending.reference}/nodes/"' in html


def test_node_choice_loads_on_demand_with_the_suggestion_ticked(login, people, pending, stock):
    client = login(people.sam)
    part = client.get(f"/ops/approvals/{pending.reference}/nodes/", HTTP_HX_REQUEST="true")
    html = part.content.decode()
    assert part.status_code == 200 and "<html" not in html  # a fragment for the card
    prefix = f"approve-{pending.pk}"
    assert f'name="{prefix}-nodes" value="{stock[0].pk}" checked' in html  # the suggestion
    assert f'name="{prefix}-nodes" value="{stock[1].pk}">' in html and "gpu-h100-a02" in html
    # without JavaScript the link opens the same choice in the page
    page = client.get(f"/ops/approvals/?choose={pending.reference}").content.decode()
    assert f'name="{prefix}-nodes" value="{stock[0].pk}" checked' in page


def test_node_choice_pages_through_many_ready_nodes(login, people, pending, sim_dir, catalog):
    for i in range(25):
        make_node(sku=H100_SKU, state_dir=sim_dir, hostname=f"gpu-h100-{i:02}")
    client = login(people.sam)
    first = client.get(f"/ops/approvals/{pending.reference}/nodes/").content.decode()
    assert first.count('type="checkbox"') == 20 and "Nodes 1–20 of 25 ready" in first
    assert "gpu-h100-00" in first and "gpu-h100-24" not in first
    second = client.get(f"/ops/approvals/{pending.reference}/nodes/?nodes_page=2").content.decode()
    assert second.count('type="checkbox"') == 5 and "gpu-h100-24" in second


def test_node_choice_of_an_order_not_in_the_queue_is_404(login, people, pending, stock):
    approvals.order_approve(order=pending, by=people.sam)
    assert login(people.sam).get(f"/ops/approvals/{pending.reference}/nodes/").status_code == 404
    assert login(people.alice).get(f"/ops/approvals/{pending.reference}/nodes/").status_code == 404


def test_the_queue_is_paged_oldest_first(login, people, catalog):
    placed = [fulfilment.order_submit(order=order_services.order_place(
        quote=make_quote(people.acme, by=people.alice), by=people.alice), by=people.alice)
        for _ in range(12)]
    client = login(people.sam)
    first = client.get("/ops/approvals/").content.decode()
    assert all(o.reference in first for o in placed[:10]) and placed[10].reference not in first
    assert "12 in all" in first and 'rel="next"' in first
    second = client.get("/ops/approvals/?page=2").content.decode()
    assert placed[10].reference in second and placed[0].reference not in second


def test_the_queue_says_when_there_is_no_plan_or_it_does_not_fit(login, people, catalog):
    for plan in ({}, {"model": "llama-3.1-70b", "sku": H100_SKU, "per_gpu_total_bytes": 95_000_000_000}):
        quote = make_quote(people.acme, by=people.alice, plan=plan)
        order = order_services.order_place(quote=quote, by=people.alice)
        fulfilment.order_submit(order=order, by=people.alice)
    html = login(people.sam).get("/ops/approvals/").content.decode()
    assert "No sizing plan." in html
    assert "Does not fit" in html and "needs 95.0 GB per GPU, H100 SXM5 80GB has 80.0 GB" in html
    assert "No ready node of this SKU" in html and "0 ready" in html


def test_an_empty_queue_says_so(login, people, catalog):
    assert "Nothing to approve" in login(people.sam).get("/ops/approvals/").content.decode()


def test_approving_takes_the_suggested_nodes(login, people, pending, stock):
    response = login(people.sam).post(f"/ops/approvals/{pending.reference}/approve/", follow=True)
    pending.refresh_from_db()
    assert pending.state == OrderState.APPROVED and pending.approved_by == people.sam
    assert list(pending.nodes.values_list("hostname", flat=True)) == ["gpu-h100-a01"]
    assert f"Order {pending.reference} approved" in response.content.decode()


def test_approving_with_picked_nodes_reserves_those(login, people, pending, stock):
    prefix = f"approve-{pending.pk}"
    login(people.sam).post(f"/ops/approvals/{pending.reference}/approve/",
                           {f"{prefix}-nodes": [stock[1].pk], f"{prefix}-note": "newer fans"})
    stock[1].refresh_from_db()
    assert stock[1].state == NodeState.RESERVED and stock[1].order_id == pending.pk
    assert "newer fans" in pending.events.last().note


def test_picking_a_node_of_the_wrong_sku_is_an_inline_error(login, people, pending, stock, sim_dir):
    wrong = make_node(sku=L4_SKU, state_dir=sim_dir, hostname="gpu-l4-x1")
    prefix = f"approve-{pending.pk}"
    response = login(people.sam).post(f"/ops/approvals/{pending.reference}/approve/",
                                      {f"{prefix}-nodes": [wrong.pk]})
    html = response.content.decode()
    assert response.status_code == 400
    assert "gpu-l4-x1 is a" in html and "this order is for" in html and 'class="error"' in html
    pending.refresh_from_db()
    wrong.refresh_from_db()
    assert pending.state == OrderState.PENDING_APPROVAL and wrong.state == NodeState.READY
    assert not Node.objects.filter(state=NodeState.RESERVED).exists()


def test_picking_too_many_nodes_is_an_inline_error(login, people, pending, stock):
    prefix = f"approve-{pending.pk}"
    response = login(people.sam).post(f"/ops/approvals/{pending.reference}/approve/",
                                      {f"{prefix}-nodes": [n.pk for n in stock]})
    assert response.status_code == 400
    assert "needs 1 node; 2 were picked" in response.content.decode()
    pending.refresh_from_db()
    assert pending.state == OrderState.PENDING_APPROVAL


def test_approving_an_order_someone_else_approved_says_so(login, people, pending, stock):
    approvals.order_approve(order=pending, by=people.sam)
    response = login(people.sam).post(f"/ops/approvals/{pending.reference}/approve/", follow=True)
    assert "already approved" in response.content.decode()
    assert Node.objects.filter(state=NodeState.RESERVED).count() == 1


def test_rejecting_needs_a_reason(login, people, pending):
    response = login(people.sam).post(f"/ops/approvals/{pending.reference}/reject/",
                                      {f"reject-{pending.pk}-reason": "  "})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Give the customer a reason for the rejection." in html
    assert '<details class="reject" open>' in html
    pending.refresh_from_db()
    assert pending.state == OrderState.PENDING_APPROVAL


def test_rejecting_with_a_reason_tells_the_customer(login, people, pending):
    login(people.sam).post(f"/ops/approvals/{pending.reference}/reject/",
                           {f"reject-{pending.pk}-reason": "No H100 free until Monday."})
    pending.refresh_from_db()
    assert pending.state == OrderState.REJECTED
    assert pending.rejection_reason == "No H100 free until Monday."


# --- runs --------------------------------------------------------------------------------------
def test_staff_see_the_step_log_of_a_failed_run(login, people, failed_run):
    html = login(people.sam).get(f"/ops/runs/{failed_run.pk}/").content.decode()
    assert "gpu-bad" in html and "Deploy OS" in html and "image checksum mismatch" in html
    assert "Retry failed steps" in html and "Swap gpu-bad" in html
    assert "hx-trigger" not in html  # a finished run is not polled
    html = login(people.sam).get("/ops/approvals/").content.decode()
    assert "Needs attention" in html and f"/ops/runs/{failed_run.pk}/" in html


def test_retrying_a_failed_step_puts_the_order_back_to_provisioning(login, people, failed_run):
    step = failed_run.steps.get(status=StepStatus.FAILED)
    response = login(people.olga).post(f"/ops/runs/{failed_run.pk}/retry/", {"step": step.pk})
    assert response.status_code == 302
    step.refresh_from_db()
    failed_run.refresh_from_db()
    assert step.status == StepStatus.PENDING and failed_run.status == RunStatus.RUNNING
    assert failed_run.order.state == OrderState.PROVISIONING


def test_retrying_a_run_without_a_failed_step_says_so(login, people, failed_run):
    client = login(people.sam)
    client.post(f"/ops/runs/{failed_run.pk}/retry/")
    response = client.post(f"/ops/runs/{failed_run.pk}/retry/", follow=True)
    assert "There is no failed step to retry" in response.content.decode()


def test_swapping_a_failed_node_brings_in_a_ready_one(login, people, failed_run, sim_dir):
    spare = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-spare")
    bad = Node.objects.get(hostname="gpu-bad")
    response = login(people.sam).post(f"/ops/runs/{failed_run.pk}/swap/", {"node": bad.pk}, follow=True)
    assert "gpu-bad swapped for gpu-spare" in response.content.decode()
    spare.refresh_from_db()
    assert spare.order_id == failed_run.order_id
    assert failed_run.steps.filter(node=spare).count() == len(STEPS[RunKind.PROVISION])


def test_swapping_in_a_node_of_the_wrong_sku_is_an_inline_error(login, people, failed_run, sim_dir):
    wrong = make_node(sku=A100_SKU, state_dir=sim_dir, hostname="gpu-a100-x")
    bad = Node.objects.get(hostname="gpu-bad")
    response = login(people.sam).post(f"/ops/runs/{failed_run.pk}/swap/",
                                      {"node": bad.pk, "replacement": wrong.pk})
    assert response.status_code == 400
    assert "gpu-a100-x is a" in response.content.decode()
    wrong.refresh_from_db()
    assert wrong.state == NodeState.READY and wrong.order_id is None
    assert not failed_run.steps.filter(node=wrong).exists()


def test_a_running_run_is_polled(login, people, pending, stock):
    approvals.order_approve(order=pending, by=people.sam)
    run = pending.runs.get()
    html = login(people.sam).get(f"/ops/runs/{run.pk}/").content.decode()
    assert f'hx-get="/ops/runs/{run.pk}/steps/"' in html and 'hx-trigger="every 2s"' in html


# --- inventory ---------------------------------------------------------------------------------
def test_the_inventory_lists_nodes_by_sku_and_state(login, people, stock, sim_dir):
    make_node(sku=A100_SKU, state_dir=sim_dir, hostname="gpu-a100-m1", state=NodeState.MAINTENANCE)
    html = login(people.olga).get("/ops/nodes/").content.decode()
    assert "gpu-h100-a01" in html and "gpu-a100-m1" in html and "Enrol a node" in html
    assert "Stock by SKU" in html and "badge-maintenance" in html
    filtered = login(people.olga).get("/ops/nodes/?state=maintenance").content.decode()
    assert "gpu-a100-m1" in filtered and "gpu-h100-a01" not in filtered


def test_an_operator_enrols_a_node(login, people, catalog):
    from portal.catalog.models import ServerSKU

    sku = ServerSKU.objects.get(slug=H100_SKU)
    response = login(people.olga).post("/ops/nodes/enrol/", {
        "hostname": "gpu-h100-z9", "sku": sku.pk, "management_address": "10.9.9.9:22",
        "driver": "simulated", "fabric_group": "leaf-z", "nvme_devices": "/dev/nvme1n1, /dev/nvme2n1",
        "wipe_method": "discard", "notes": "", "ready": "on"})
    node = Node.objects.get(hostname="gpu-h100-z9")
    assert response.status_code == 302 and response.url == f"/ops/nodes/{node.pk}/"
    # Not stock yet: the reachability and health check is queued (after commit) to accept it.
    assert node.state == NodeState.ENROLLED and node.nvme_devices == ["/dev/nvme1n1", "/dev/nvme2n1"]
    assert node.fabric_group == "leaf-z"


def test_enrolling_a_duplicate_hostname_is_an_inline_error(login, people, stock):
    response = login(people.olga).post("/ops/nodes/enrol/", {
        "hostname": "gpu-h100-a01", "sku": stock[0].sku_id, "management_address": "10.1.1.1",
        "driver": "simulated", "wipe_method": "files"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "A node named gpu-h100-a01 is already enrolled" in html and 'class="error"' in html
    assert Node.objects.count() == 2


def test_an_approver_cannot_enrol(login, people, catalog):
    response = login(people.sam).get("/ops/nodes/enrol/")
    assert response.status_code == 403
    assert "This page is for operators. Your role is staff approver" in response.content.decode()


def test_maintenance_and_back_and_the_history(login, people, stock):
    node = stock[0]
    client = login(people.olga)
    client.post(f"/ops/nodes/{node.pk}/enter_maintenance/", {"note": "replacing a fan"})
    node.refresh_from_db()
    assert node.state == NodeState.MAINTENANCE
    response = client.post(f"/ops/nodes/{node.pk}/return_to_service/", follow=True)
    assert "is being checked (reachability and health)" in response.content.decode()
    node.refresh_from_db()
    assert node.state == NodeState.MAINTENANCE  # not stock until the check passes
    node_accept_check_task(node.pk, people.olga.pk)  # what the queued check runs
    node.refresh_from_db()
    assert node.state == NodeState.READY
    html = client.get(f"/ops/nodes/{node.pk}/").content.decode()
    assert "replacing a fan" in html and "Maintenance" in html and "olga" in html
    assert NodeEvent.objects.filter(node=node, actor=people.olga).count() == 2


def test_a_node_serving_an_order_cannot_go_into_maintenance(login, people, pending, stock):
    approvals.order_approve(order=pending, by=people.sam)
    node = pending.nodes.get()
    response = login(people.olga).post(f"/ops/nodes/{node.pk}/enter_maintenance/", follow=True)
    node.refresh_from_db()
    assert node.state == NodeState.RESERVED
    assert "swap or terminate" in response.content.decode()


def test_an_unknown_node_action_is_404(login, people, stock):
    assert login(people.olga).post(f"/ops/nodes/{stock[0].pk}/explode/").status_code == 404


def test_node_choice_is_for_approvers_and_a_page_that_is_no_number_shows_the_first(login, people, pending,
                                                                                   stock):
    url = f"/ops/approvals/{pending.reference}/nodes/"
    assert login(people.alice).get(url).status_code == 404  # the order's own customer
    assert login(people.olga).get(url).status_code == 403  # staff of another role
    page = login(people.sam).get(url + "?nodes_page=not-a-number")
    html = page.content.decode()
    assert page.status_code == 200 and html.count('type="checkbox"') == 2 and "gpu-h100-a01" in html
