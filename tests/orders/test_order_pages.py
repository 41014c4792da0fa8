"""The customer's order pages: my orders, place from a quote, detail, progress, cancel, terminate,
the day-2 server page. Every page: an outsider gets 404."""

import pytest
from django.urls import reverse

from portal.orders import services as order_services
from portal.orders.models import Order
from portal.orders.states import OrderState
from provisioning.fulfilment import approvals, day2
from provisioning.fulfilment import orders as fulfilment
from provisioning.models import Node, ProvisioningRun
from provisioning.pipeline import runs
from provisioning.states import RunKind
from tests.factories import H100_SKU, SIZED_PLAN, drain, make_node, make_quote


def page(client, url):
    response = client.get(url)
    return response, response.content.decode()


# --- my orders ---------------------------------------------------------------------------------
def test_my_orders_lists_the_organisations_orders_with_state_badges(login, people, placed):
    other = make_quote(people.outsider_org, by=people.charlie)
    order_services.order_place(quote=other, by=people.charlie)
    response, html = page(login(people.alice), "/orders/")
    assert response.status_code == 200
    assert placed.reference in html
    assert 'class="badge badge-pending_approval"' in html and "Pending approval" in html
    assert "$" in html and "/h" in html
    assert Order.objects.count() == 2 and other.reference not in html


def test_an_empty_list_points_to_the_sizing_wizard(login, people, catalog):
    _, html = page(login(people.alice), "/orders/")
    assert "No orders yet" in html and 'href="/sizing/"' in html


def test_my_orders_needs_a_login(client):
    assert client.get("/orders/").status_code == 302


# --- placing an order --------------------------------------------------------------------------
def test_placing_an_order_from_a_quote_submits_it_and_shows_it(login, people, catalog):
    quote = make_quote(people.acme, by=people.alice, plan=SIZED_PLAN)
    client = login(people.alice)
    response = client.post(f"/orders/place/{quote.reference}/")
    order = Order.objects.get()
    assert response.status_code == 302 and response.url == f"/orders/{order.reference}/"
    assert order.state == OrderState.PENDING_APPROVAL and order.quote == quote
    assert order.placed_by == people.alice and order.plan["model"] == "llama-3.1-8b"
    html = client.get(response.url).content.decode()
    assert f"Order {order.reference} placed" in html and "Pending approval" in html


def test_placing_the_same_quote_twice_orders_once(login, people, catalog):
    quote = make_quote(people.acme, by=people.alice)
    client = login(people.alice)
    first = client.post(f"/orders/place/{quote.reference}/")
    second = client.post(f"/orders/place/{quote.reference}/", follow=True)
    assert Order.objects.count() == 1
    assert second.redirect_chain[-1][0] == first.url
    assert "already ordered" in second.content.decode()


def test_an_expired_quote_is_refused_with_a_clear_message(login, people, catalog):
    quote = make_quote(people.acme, by=people.alice, valid_days=-1)
    response = login(people.alice).post(f"/orders/place/{quote.reference}/", follow=True)
    assert not Order.objects.exists()
    assert response.redirect_chain[-1][0] == f"/configure/quotes/{quote.reference}/"
    assert "expired" in response.content.decode() and "make a new quote" in response.content.decode()


def test_an_outsider_cannot_order_another_organisations_quote(login, people, catalog):
    quote = make_quote(people.acme, by=people.alice)
    assert login(people.charlie).post(f"/orders/place/{quote.reference}/").status_code == 404
    assert not Order.objects.exists()


def test_placing_needs_a_post(login, people, catalog):
    quote = make_quote(people.acme, by=people.alice)
    assert login(people.alice).get(f"/orders/place/{quote.reference}/").status_code == 405


# --- detail ------------------------------------------------------------------------------------
def test_the_detail_shows_configuration_price_plan_fit_and_history(login, people, placed):
    response, html = page(login(people.alice), f"/orders/{placed.reference}/")
    assert response.status_code == 200
    assert "8× NVIDIA H100 SXM5 80GB" in html and "GbE" in html
    assert "per hour" in html and "per month" in html
    assert "Sizing plan" in html and "Fits:" in html and "61.4 GB of 80.0 GB per GPU" in html
    assert "Optimizer states" in html  # the memory breakdown, with units, not JSON
    assert "memory_breakdown_bytes" not in html and "per_gpu_total_bytes" not in html  # no raw JSON
    assert 'id="history"' in html and "Submitted" in html and "alice" in html
    assert "Cancel order" in html and "Terminate" not in html


def test_an_order_without_a_plan_says_so(login, people, catalog):
    quote = make_quote(people.acme, by=people.alice, plan={})
    order = fulfilment.order_submit(order=order_services.order_place(quote=quote, by=people.alice),
                                  by=people.alice)
    _, html = page(login(people.alice), f"/orders/{order.reference}/")
    assert "No sizing plan." in html


def test_a_plan_that_does_not_fit_the_ordered_gpu_says_so(login, people, catalog):
    plan = dict(SIZED_PLAN, per_gpu_total_bytes=95_000_000_000)
    quote = make_quote(people.acme, by=people.alice, plan=plan)
    order = order_services.order_place(quote=quote, by=people.alice)
    _, html = page(login(people.alice), f"/orders/{order.reference}/")
    assert "Does not fit" in html and "needs 95.0 GB per GPU, H100 SXM5 80GB has 80.0 GB" in html


def test_a_rejected_order_shows_the_reason(login, people, placed):
    approvals.order_reject(order=placed, by=people.sam, reason="No H100 free until Monday.")
    _, html = page(login(people.alice), f"/orders/{placed.reference}/")
    assert "Rejected:" in html and "No H100 free until Monday." in html


def test_the_numeric_url_redirects_to_the_reference(login, people, placed):
    response = login(people.alice).get(f"/orders/{placed.pk}/")
    assert response.status_code == 302 and response.url == f"/orders/{placed.reference}/"


def test_a_reseller_admin_sees_its_customers_order(login, people, catalog):
    quote = make_quote(people.client_org, by=people.rita)
    order = order_services.order_place(quote=quote, by=people.rita)
    assert login(people.rita).get(f"/orders/{order.reference}/").status_code == 200


@pytest.mark.parametrize("suffix,method", [
    ("", "get"), ("progress/", "get"), ("cancel/", "post"), ("terminate/", "get"),
    ("terminate/", "post"), ("server/", "get"), ("server/reboot/", "post"),
    ("server/redeploy/", "post"),
])
def test_an_outsider_gets_404_on_every_order_page(login, people, placed, suffix, method):
    client = login(people.charlie)
    response = getattr(client, method)(f"/orders/{placed.reference}/{suffix}", {"confirm": "on"})
    assert response.status_code == 404
    placed.refresh_from_db()
    assert placed.state == OrderState.PENDING_APPROVAL
    assert login(people.charlie).get(f"/orders/{placed.pk}/").status_code == 404


# --- live progress -----------------------------------------------------------------------------
def test_the_progress_partial_polls_while_the_run_works_and_stops_when_done(
        login, people, catalog, sim_dir, placed):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    approvals.order_approve(order=placed, by=people.sam)
    client = login(people.alice)
    html = client.get(f"/orders/{placed.reference}/").content.decode()
    assert 'hx-trigger="every 2s"' in html and 'role="progressbar"' in html
    assert "Waiting for a worker" in html and "<noscript>" in html
    drain(placed.runs.get().pk)
    partial = client.get(f"/orders/{placed.reference}/progress/?state=active&run=succeeded",
                         HTTP_HX_REQUEST="true")
    text = partial.content.decode()
    assert partial.status_code == 200 and "hx-trigger" not in text
    assert 'aria-valuenow="100"' in text and "Acceptance test" in text and "Handover" in text
    assert "handed over to" in text  # log lines of the steps


def test_the_partial_reloads_the_page_when_the_order_moved_on(login, people, active):
    response = login(people.alice).get(f"/orders/{active.reference}/progress/?state=provisioning&run=running",
                                       HTTP_HX_REQUEST="true")
    assert response.status_code == 204 and response["HX-Refresh"] == "true"


# --- cancel and terminate ----------------------------------------------------------------------
def test_a_customer_cancels_a_pending_order(login, people, placed):
    response = login(people.alice).post(f"/orders/{placed.reference}/cancel/", {"reason": "wrong size"},
                                        follow=True)
    placed.refresh_from_db()
    assert placed.state == OrderState.CANCELLED
    assert "is cancelled" in response.content.decode()
    assert placed.events.last().note == "wrong size"


def test_an_active_order_cannot_be_cancelled(login, people, active):
    response = login(people.alice).post(f"/orders/{active.reference}/cancel/", follow=True)
    active.refresh_from_db()
    assert active.state == OrderState.ACTIVE
    assert "Cannot cancel" in response.content.decode()


def test_termination_asks_for_confirmation(login, people, active):
    client = login(people.alice)
    html = client.get(f"/orders/{active.reference}/terminate/").content.decode()
    assert "This cannot be undone" in html and "Terminate server" in html
    response = client.post(f"/orders/{active.reference}/terminate/", {"note": ""})
    assert response.status_code == 400
    assert "Tick the box to confirm" in response.content.decode()
    active.refresh_from_db()
    assert active.state == OrderState.ACTIVE


def test_termination_of_an_active_server_starts_the_wipe(login, people, active):
    response = login(people.alice).post(f"/orders/{active.reference}/terminate/", {"confirm": "on"})
    assert response.status_code == 302
    active.refresh_from_db()
    assert active.state == OrderState.TERMINATING
    assert ProvisioningRun.objects.filter(order=active, kind=RunKind.TERMINATE).exists()


def test_a_pending_order_cannot_be_terminated(login, people, placed):
    html = login(people.alice).get(f"/orders/{placed.reference}/terminate/").content.decode()
    assert "only an active server" in html and "Terminate server" not in html


def test_urls_reverse():
    assert reverse("orders:detail", args=["O-ABCD1234"]) == "/orders/O-ABCD1234/"
    assert reverse("orders:place", args=["Q-1"]) == "/orders/place/Q-1/"


# --- termination during a reboot; what a crash shows the customer -------------------------------
def test_termination_during_a_reboot_is_refused_with_a_message(login, people, active):
    reboot = day2.server_reboot(order=active, by=people.alice)
    runs.run_start(run_id=reboot.pk)
    response = login(people.alice).post(f"/orders/{active.reference}/terminate/", {"confirm": "on"},
                                        follow=True)
    assert "A reboot is in progress; terminate once it has finished." in response.content.decode()
    active.refresh_from_db()
    assert active.state == OrderState.ACTIVE
    assert not ProvisioningRun.objects.filter(order=active, kind=RunKind.TERMINATE).exists()
    assert ProvisioningRun.objects.get(pk=reboot.pk).status == "running"


def test_a_crashed_step_shows_no_internals_to_the_customer(login, people, catalog, sim_dir, placed):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    Node.objects.filter(pk=node.pk).update(nvme_devices=7)  # a bad inventory row: configure crashes
    approvals.order_approve(order=placed, by=people.sam)
    run = placed.runs.get()
    drain(run.pk)
    _, customer = page(login(people.alice), f"/orders/{placed.reference}/")
    assert "internal error; our staff has been told" in customer
    assert "TypeError" not in customer and "internal error in configure" not in customer
    _, staff = page(login(people.sam), f"/ops/runs/{run.pk}/")
    assert "internal error in configure: TypeError" in staff
