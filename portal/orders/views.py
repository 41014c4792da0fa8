"""The customer's order pages: my orders, place from a quote, detail with live progress, day 2.

Views are adapters: look the order up in the user's tenant scope (outsiders get 404), call a
service (``portal.orders.services``, ``provisioning.fulfilment.orders``, ``provisioning.fulfilment.day2``),
render what selectors read.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.accounts.models import Organisation
from portal.accounts.selectors import organisations_for
from portal.billing.forms import TerminateAtForm
from portal.billing.selectors import (
    marked_up_hourly,
    meter_keys,
    order_price,
    order_summary,
    price_basis,
)
from portal.billing.services import order_deadline_set
from portal.core.keyset import keyset_page
from portal.core.states import DomainError
from portal.orders import services as order_services
from portal.orders.forms import CancelForm, StaffCancelForm, TerminateForm
from portal.orders.models import Order
from portal.orders.selectors import (
    LIST_ROW_UNUSED,
    order_history,
    order_rows_for,
    orders_for,
    plan_fit,
)
from portal.orders.states import ORDER_TRANSITIONS, OrderState, QuoteAlreadyOrdered
from portal.quotes.selectors import quote_for_user, stock_note
from provisioning.fulfilment import day2
from provisioning.fulfilment import orders as fulfilment
from provisioning.fulfilment.selectors import (
    acceptance_report,
    order_access,
    order_last_health,
    order_progress,
)
from provisioning.fulfilment.ssh_keys import order_ssh_keys
from provisioning.monitoring.card import gpu_charts_context
from provisioning.stack.selectors import StaleFile, stack_downloads, stack_file
from provisioning.storage.selectors import retained_data_for, storage_for
from provisioning.storage.services import (
    StorageResult,
    credential_reveal,
    credentials_file_snippet,
    storage_result_for,
)

ORDERS_PER_PAGE = 25


# Orders that were handed over: they have (or had) a cost.
BILLED_STATES = frozenset({OrderState.ACTIVE, OrderState.TERMINATING, OrderState.TERMINATED})


@login_required
@require_GET
def order_list(request):
    """The orders a user may see, newest first by keyset pages; one who sees several
    organisations (a reseller's admin: its customers) gets the organisation column and a filter."""
    orders = order_rows_for(request.user)
    organisations = [] if request.user.is_hosting_staff else list(
        organisations_for(request.user).order_by("name"))
    chosen = request.GET.get("customer", "")
    if chosen:
        orders = orders.filter(organisation__slug=chosen)
    markup = (price_basis(request.user, organisations[0]) if len(organisations) == 1 else None)
    if markup is not None:  # a reseller's customer: its prices are marked up from the lines
        orders = orders.defer(None).defer(*(f for f in LIST_ROW_UNUSED if f != "price_lines"))
    page = keyset_page(orders, field="created_at", size=ORDERS_PER_PAGE,
                       older=request.GET.get("older"), newer=request.GET.get("newer"))
    if markup is not None:
        marked_up_hourly(page.rows, markup=markup)
    show_org = len(organisations) > 1 or (request.user.is_hosting_staff and
                                          len({o.organisation_id for o in page}) > 1)
    reseller = any(o.kind == Organisation.Kind.RESELLER for o in organisations)
    return render(request, "orders/list.html", {
        "page": page, "show_org": show_org, "organisations": organisations if len(organisations) > 1
        else [], "chosen": chosen, "org_label": "Customer" if reseller else "Organisation"})


@login_required
@require_POST
def order_place(request, quote_reference: str):
    quote = quote_for_user(user=request.user, reference=quote_reference)
    if quote is None:
        raise Http404("No such quote.")
    try:
        with transaction.atomic():
            order = order_services.order_place(quote=quote, by=request.user)
            fulfilment.order_submit(order=order, by=request.user)
    except QuoteAlreadyOrdered as exc:  # a second click on "Place order" must not order twice
        messages.info(request, str(exc))
        return redirect("orders:detail", reference=exc.order.reference)
    except DomainError as exc:
        messages.error(request, str(exc))
        return redirect("quotes:quote", reference=quote.reference)
    next_step = ("Our staff checks fit and stock before the build starts."
                 if order.state == OrderState.PENDING_APPROVAL else "It is approved; we are setting it up.")
    if order.state == OrderState.PENDING_APPROVAL:
        next_step += " " + _waiting_for_stock(order)
    messages.success(request, f"Order {order.reference} placed. {next_step}")
    return redirect("orders:detail", reference=order.reference)


@login_required
@require_GET
def order_detail(request, reference: str):
    order = get_object_or_404(orders_for(request.user), reference=reference)
    return render(request, "orders/detail.html", _detail_context(request, order))


@login_required
@require_GET
def order_detail_by_id(request, pk: int):
    order = get_object_or_404(orders_for(request.user), pk=pk)
    return redirect("orders:detail", reference=order.reference)


@login_required
@require_GET
def order_progress_partial(request, reference: str):
    """The live progress card, polled by htmx. When the order or run moved on since the page was
    drawn, the whole page reloads (HX-Refresh) so badges, actions and access details follow."""
    order = get_object_or_404(orders_for(request.user), reference=reference)
    progress = order_progress(order)
    seen = (request.GET.get("state"), request.GET.get("run"))
    if request.htmx and seen != (order.state, progress.run_status):
        return HttpResponse(status=204, headers={"HX-Refresh": "true"})
    return render(request, "orders/_progress.html", {"order": order, "progress": progress,
                                                     "is_staff": request.user.is_hosting_staff})


@login_required
@require_POST
def order_cancel(request, reference: str):
    order = get_object_or_404(orders_for(request.user), reference=reference)
    form = (StaffCancelForm if request.user.is_hosting_staff else CancelForm)(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(form.errors.get("reason", ["Check the reason."])))
        return redirect("orders:detail", reference=order.reference)
    was_failed = order.state == OrderState.PROVISION_FAILED
    try:
        fulfilment.order_cancel(order=order, by=request.user, reason=form.cleaned_data["reason"])
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Order {order.reference} is cancelled; nothing is billed." + (
            " The nodes set aside for it are wiped and go back to stock." if was_failed else ""))
    return redirect("orders:detail", reference=order.reference)


@login_required
@require_http_methods(["GET", "POST"])
def order_terminate(request, reference: str):
    order = get_object_or_404(orders_for(request.user), reference=reference)
    form = TerminateForm(request.POST or None)
    if request.method == "POST" and order.state == OrderState.PROVISION_FAILED:
        messages.error(request, f"The set-up of {order.reference} failed, so no server ran: "
                                f"cancel the order instead (nothing is billed).")
        return redirect("orders:detail", reference=order.reference)
    if request.method == "POST" and form.is_valid():
        try:
            fulfilment.order_request_termination(order=order, by=request.user,
                                               note=form.cleaned_data["note"])
        except DomainError as exc:
            messages.error(request, str(exc))
        else:
            kept = ("checkpoints are copied to your bucket, then " if order.has_object_storage
                    else "")
            messages.success(request, f"Termination of {order.reference} started: {kept}access is "
                                      f"revoked and the disks are wiped.")
        return redirect("orders:detail", reference=order.reference)
    status = 400 if form.is_bound else 200
    return render(request, "orders/terminate.html", {
        "order": order, "form": form, "allowed": _can_terminate(order),
        "storage": storage_for(order), "retain_until": _retain_until_if_now(order)}, status=status)


@login_required
@require_GET
def server_detail(request, reference: str):
    order = get_object_or_404(orders_for(request.user).select_related("termination_deadline"),
                              reference=reference)
    if order.state != OrderState.ACTIVE:
        messages.info(request, f"Order {order.reference} is {order.get_state_display().lower()}; "
                               f"the server page is for active servers.")
        return redirect("orders:detail", reference=order.reference)
    progress = order_progress(order)
    return render(request, "orders/server.html", {
        "order": order, "access": order_access(order), "report": acceptance_report(order),
        "health": order_last_health(order), "progress": progress,
        "day2_busy": progress.run_id is not None and not progress.done,
        "is_staff": request.user.is_hosting_staff, "storage": storage_for(order),
        "stack_files": stack_downloads(order),
        "ssh_keys": order_ssh_keys(order),
        **_priced_for(request, order, summary=True),
        "deadline": getattr(order, "termination_deadline", None),  # none set: no row
        **gpu_charts_context(order, range_key=request.GET.get("range"), node=request.GET.get("node")),
    })


@login_required
@require_GET
def server_metrics(request, reference: str):
    order = get_object_or_404(orders_for(request.user), reference=reference, state=OrderState.ACTIVE)
    return render(request, "orders/_gpu_charts.html", {
        "order": order, **gpu_charts_context(order, range_key=request.GET.get("range"),
                                             node=request.GET.get("node"))})


@login_required
@require_GET
def server_stack_file(request, reference: str, hostname: str, name: str):
    """One file the stack step put on a node, rendered again on demand (as recorded)."""
    order = get_object_or_404(orders_for(request.user), reference=reference)
    try:
        file = stack_file(order, hostname=hostname, name=name)
    except StaleFile as exc:
        return HttpResponse(str(exc), status=409, content_type="text/plain; charset=utf-8")
    if file is None:
        raise Http404("No such file on this server.")
    response = HttpResponse(file.content, content_type=f"{file.content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{hostname}-{file.name}"'
    response["X-Content-SHA256"] = file.sha256
    return response


@never_cache
@login_required
@require_POST
def server_storage_reveal(request, reference: str):
    """Shows the bucket key's secret once, with a ready credentials file; afterwards only rotate."""
    order = get_object_or_404(orders_for(request.user), reference=reference)
    revealed = credential_reveal(order=order)
    if revealed is None:
        messages.info(request, "The secret of this key was already shown once. Rotate the key to "
                               "get a new one.")
        return redirect("orders:server", reference=order.reference)
    access_key_id, secret = revealed
    result = storage_result_for(order)
    response = render(request, "orders/storage_secret.html", {
        "order": order, "storage": result, "access_key_id": access_key_id, "secret": secret,
        "snippet": credentials_file_snippet(result=result, secret=secret)})
    response["Referrer-Policy"] = "no-referrer"
    return response


@login_required
@require_POST
def order_data_key(request, reference: str):
    """Asks for a read-only key to the terminated order's retained bucket (issued by a worker)."""
    order = get_object_or_404(orders_for(request.user), reference=reference)
    try:
        day2.order_retention_key_request(order=order, by=request.user)
    except DomainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "A read-only key is being issued; it appears here within a "
                                  "minute. Reload the page to see it.")
    return redirect(f"{reverse('orders:detail', args=[order.reference])}#data-title")


@never_cache
@login_required
@require_POST
def order_data_key_reveal(request, reference: str):
    """Shows the read-only key's secret once."""
    order = get_object_or_404(orders_for(request.user), reference=reference)
    revealed = credential_reveal(order=order, read_only=True)
    data = retained_data_for(order)
    if revealed is None or data is None:
        messages.info(request, "The secret of this key was already shown once. Issue a new "
                               "read-only key to get another.")
        return redirect(f"{reverse('orders:detail', args=[order.reference])}#data-title")
    access_key_id, secret = revealed
    where = StorageResult(bucket=data.bucket, endpoint=data.endpoint, region=data.region,
                          access_key_id=access_key_id)
    response = render(request, "orders/storage_secret.html", {
        "order": order, "storage": where, "access_key_id": access_key_id, "secret": secret,
        "read_only": True, "retain_until": data.retain_until,
        "snippet": credentials_file_snippet(result=where, secret=secret)})
    response["Referrer-Policy"] = "no-referrer"
    return response


# Actions that stop what runs on the server: the page asks first, the POST carries confirm=yes.
CONFIRMED_ACTIONS = {"reboot": "reboot", "redeploy": "re-deploy"}


@login_required
@require_POST
def server_action(request, reference: str, action: str):
    order = get_object_or_404(orders_for(request.user), reference=reference)
    service, done = {
        "reboot": (day2.server_reboot, "Reboot started"),
        "redeploy": (day2.server_redeploy_stack, "Re-deploying the training stack"),
        "rotate_storage_key": (day2.server_rotate_storage_key,
                               "Rotating the bucket key"),
    }[action]
    if action in CONFIRMED_ACTIONS and request.POST.get("confirm") != "yes":
        messages.error(request, f"Nothing was done: confirm the {CONFIRMED_ACTIONS[action]} "
                                f"first (it stops what runs on the server).")
        return redirect("orders:server", reference=order.reference)
    try:
        service(order=order, by=request.user)
        messages.success(request, f"{done} on {order.reference}; follow it below.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("orders:server", reference=order.reference)


@login_required
@require_POST
def server_terminate_at(request, reference: str):
    """The customer's "terminate at" (UTC) for an active server, or none."""
    order = get_object_or_404(orders_for(request.user), reference=reference)
    form = TerminateAtForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(e for errors in form.errors.values() for e in errors))
        return redirect("orders:server", reference=order.reference)
    try:
        deadline = order_deadline_set(order=order, terminate_at=form.cleaned_data["terminate_at"],
                                      by=request.user)
        messages.success(request, f"{order.reference} terminates automatically at "
                                  f"{deadline.terminate_at:%Y-%m-%d %H:%M} UTC." if deadline
                         else f"{order.reference} no longer terminates automatically.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("orders:server", reference=order.reference)


# --- helpers (reads for the templates) ---------------------------------------------------------
def _allowed(order: Order, transition: str) -> bool:
    return ORDER_TRANSITIONS.get(transition).allowed_from(order.state)


def _can_terminate(order: Order) -> bool:
    """A server that ran; one whose set-up failed never did, and is cancelled instead."""
    return order.state != OrderState.PROVISION_FAILED and _allowed(order, "request_termination")


def _waiting_for_stock(order: Order) -> str:
    """Before approval: whether enough nodes are ready, and what happens if not."""
    if order.state not in (OrderState.SUBMITTED, OrderState.PENDING_APPROVAL):
        return ""
    return stock_note(order.sku, requested=order.node_count)


def _failed_step(progress) -> dict | None:
    """Where set-up stopped, in words a customer may read (the step's name and the node), never
    the step's error, which is for staff."""
    for node in progress.nodes:
        for step in node.steps:
            if step.status == "failed":
                return {"label": step.label, "hostname": node.hostname}
    return None


def _retain_until_if_now(order: Order):
    """When the order's bucket would be deleted if it were terminated now."""
    if not order.has_object_storage:
        return None
    return timezone.now() + timedelta(days=order.storage_retention_days)


def _priced_for(request, order: Order, *, summary: bool) -> dict:
    """The order's price and (``summary``) its cost so far, as the viewer reads them: a
    reseller's customer's people at the reseller's selling prices (``price_basis``)."""
    markup = price_basis(request.user, order.organisation)
    keys = meter_keys([order.pk]) if markup is not None else None
    return {"price": order_price(order, markup=markup, keys=keys),
            "summary": order_summary(order, markup=markup, keys=keys) if summary else None}


def _detail_context(request, order: Order) -> dict:
    staff = request.user.is_hosting_staff
    progress = order_progress(order)
    return {
        "order": order,
        "history": order_history(order, staff=staff, viewer=request.user),
        "progress": progress,
        "fit": plan_fit(order),
        "can_cancel": _allowed(order, "cancel"),
        "can_terminate": _can_terminate(order),
        "failed_at": _failed_step(progress) if order.state == OrderState.PROVISION_FAILED else None,
        "stock_note": _waiting_for_stock(order),
        "cancel_form": StaffCancelForm() if staff else CancelForm(),
        "support_email": settings.SUPPORT_EMAIL,
        "is_staff": staff,
        "retained": (retained_data_for(order)
                     if order.state in (OrderState.TERMINATING, OrderState.TERMINATED) else None),
        **_priced_for(request, order, summary=order.state in BILLED_STATES),
    }
