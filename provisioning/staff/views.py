"""Staff pages under /ops/: the approval queue, a run's step log, the node inventory.

Anyone who is not staff gets 404 (nothing about the pages leaks). Views call the services of
``provisioning.fulfilment.approvals`` and ``provisioning.services``, read through ``provisioning.selectors``
and turn a DomainError into an inline form error or a message.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.accounts.lockouts import lockout_clear, lockout_minutes, lockouts_list
from portal.catalog.models import ServerSKU
from portal.core.staff import operator_only, staff_only
from portal.core.states import DomainError, TransitionNotAllowed
from portal.orders.models import Order
from provisioning.fulfilment import approvals as approval_services
from provisioning.fulfilment import day2
from provisioning.fulfilment import selectors as fulfilment_selectors
from provisioning.inventory import selectors as inventory_selectors
from provisioning.inventory import services as inventory_services
from provisioning.inventory.enrolment import EnrolmentRefused
from provisioning.inventory.node_power import NODE_POWER_ACTIONS, node_power_refusal
from provisioning.models import Node, ProvisioningRun, StepRun
from provisioning.monitoring.alerts import alerted_node_ids
from provisioning.monitoring.health import operator_problems
from provisioning.pipeline import selectors as pipeline_selectors
from provisioning.pipeline import services as pipeline_services
from provisioning.retention import run_log_past_window
from provisioning.staff.forms import (
    ApproveForm,
    NodeEditForm,
    NodeEnrolForm,
    NodeNoteForm,
    RejectForm,
    SwapForm,
)
from provisioning.states import NODE_FAILED, NODE_TRANSITIONS, NodeState, RunKind, RunStatus

approver_only = staff_only(lambda u: u.is_approver, role="staff approvers")
staff_required = staff_only(lambda u: u.is_approver or u.is_operator, role="approvers and operators")


# --- approval queue ---------------------------------------------------------------------------
QUEUE_PER_PAGE = approval_services.QUEUE_PAGE_SIZE
NODE_CHOICES_PER_PAGE = 20


@approver_only
@require_GET
def approvals(request):
    return _render_queue(request)


@approver_only
@require_GET
def approval_nodes(request, reference: str):
    """The node choice of one queued order (htmx loads it into the order's card on demand)."""
    order = get_object_or_404(approval_services.approval_queue_orders(), reference=reference)
    [item] = approval_services.approval_queue_items([order])
    return render(request, "staff/_node_choice.html", {
        "order": order, "form": ApproveForm(order=order),
        "choice": _node_choice(item, None, request.GET.get("nodes_page"))})


@approver_only
@require_POST
def approve(request, reference: str):
    order = get_object_or_404(_queue_order_rows(), reference=reference)
    form = ApproveForm(request.POST, order=order)
    if form.is_valid():
        node_ids = [n.pk for n in form.cleaned_data["nodes"]] or None
        try:
            approval_services.order_approve(order=order, by=request.user, node_ids=node_ids,
                                         note=form.cleaned_data["note"])
        except TransitionNotAllowed as exc:  # someone else decided first
            messages.warning(request, str(exc))
            return redirect("provisioning:approvals")
        except DomainError as exc:  # wrong SKU, wrong count, node taken, out of stock
            form.add_error("nodes", str(exc))
        else:
            messages.success(request, f"Order {order.reference} approved; provisioning starts now.")
            return redirect("provisioning:approvals")
    return _render_queue(request, bound=form, status=400)


@approver_only
@require_POST
def reject(request, reference: str):
    order = get_object_or_404(_queue_order_rows(), reference=reference)
    form = RejectForm(request.POST, order=order)
    if form.is_valid():
        try:
            approval_services.order_reject(order=order, by=request.user, reason=form.cleaned_data["reason"],
                                           internal_note=form.cleaned_data["internal_note"])
        except TransitionNotAllowed as exc:
            messages.warning(request, str(exc))
            return redirect("provisioning:approvals")
        except DomainError as exc:
            form.add_error("reason", str(exc))
        else:
            messages.success(request, f"Order {order.reference} rejected; the customer has been told why.")
            return redirect("provisioning:approvals")
    return _render_queue(request, bound=form, status=400)


def _queue_order_rows():
    """Orders as the queue reads them, in any state (a decided one says so, not 404)."""
    return Order.objects.select_related(
        "organisation", "sku__gpu", "nvme", "network", "storage_provider", "strategy", "tracker",
        "placed_by")


def _render_queue(request, *, bound=None, status=200):
    """A page of the queue. The order of a refused decision is shown (with its node choice
    open when nodes were picked) whichever page it is on; ``?choose=`` opens one order's node
    choice without JavaScript."""
    params = request.POST if bound is not None else request.GET
    page = Paginator(approval_services.approval_queue_orders(), QUEUE_PER_PAGE).get_page(
        params.get("page"))
    orders = list(page.object_list)
    if bound is not None and bound.order.pk not in {o.pk for o in orders}:
        orders.insert(0, bound.order)
    choose = bound.order.reference if isinstance(bound, ApproveForm) else request.GET.get("choose")
    entries = []
    for item in approval_services.approval_queue_items(orders):
        approve_form = reject_form = None
        if bound is not None and bound.order.pk == item.order.pk:
            approve_form = bound if isinstance(bound, ApproveForm) else None
            reject_form = bound if isinstance(bound, RejectForm) else None
        form = approve_form or ApproveForm(order=item.order)
        entries.append({
            "item": item, "order": item.order, "fit": item.fit, "approve_form": form,
            "choice": (_node_choice(item, approve_form, request.GET.get("nodes_page"))
                       if item.order.reference == choose else None),
            "reject_form": reject_form or RejectForm(order=item.order),
            "open_reject": reject_form is not None,
        })
    attention = pipeline_selectors.runs_needing_attention()
    return render(request, "staff/approvals.html", {
        "entries": entries, "page": page, "attention": attention[:ATTENTION_ROWS],
        "attention_count": attention.count()}, status=status)


ATTENTION_ROWS = 10


def _node_choice(item, bound, page_number) -> dict:
    """A page of the ready nodes of the order's SKU to pick from; the suggestion ticked unless
    the approver's own picks came back with an error."""
    nodes = Paginator(inventory_selectors.eligible_nodes_for(item.order), NODE_CHOICES_PER_PAGE)
    suggested = {n.pk for n in item.suggested}
    return {"page": nodes.get_page(page_number), "suggested": suggested,
            "selected": _picked(bound) if bound is not None else suggested}


def _picked(form) -> set[int]:
    values = [getattr(v, "pk", v) for v in (form["nodes"].value() or [])]
    return {int(v) for v in values if str(v).isdigit()}


# --- runs -------------------------------------------------------------------------------------
@staff_required
@require_GET
def run_detail(request, pk: int):
    return _render_run(request, _run(pk))


@staff_required
@require_GET
def run_steps_partial(request, pk: int):
    run = _run(pk)
    return render(request, "staff/_run_steps.html", _run_context(request, run))


@staff_required
@require_POST
def run_retry(request, pk: int):
    run = _run(pk)
    step_id = request.POST.get("step", "")
    step_run = get_object_or_404(StepRun, pk=step_id, run=run) if step_id.isdigit() else None
    try:
        pipeline_services.run_retry_step(run=run, by=request.user, step_run=step_run)
        messages.success(request, "Retrying: the failed step runs again.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("provisioning:run", pk=run.pk)


@staff_required
@require_POST
def run_drop_storage(request, pk: int):
    """Staff rescue: the order goes on without object storage (audited, customer told)."""
    run = _run(pk)
    try:
        day2.order_drop_storage(order=run.order, by=request.user,
                                note=request.POST.get("note", "").strip()[:500])
        messages.success(request, "Object storage dropped from the order; the customer was told by "
                                  "e-mail and the failed steps run again.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("provisioning:run", pk=run.pk)


@staff_required
@require_POST
def run_swap(request, pk: int):
    run = _run(pk)
    form = SwapForm(request.POST)
    if form.is_valid():
        try:
            new = pipeline_services.run_swap_node(run=run, node=form.cleaned_data["node"], by=request.user,
                                                  replacement=form.cleaned_data["replacement"],
                                                  note=form.cleaned_data["note"])
        except DomainError as exc:
            form.add_error("replacement", str(exc))
        else:
            messages.success(request, f"{form.cleaned_data['node'].hostname} swapped for {new.hostname}; "
                                      f"its steps run now.")
            return redirect("provisioning:run", pk=run.pk)
    return _render_run(request, run, swap_form=form, status=400)


def _run(pk: int) -> ProvisioningRun:
    return get_object_or_404(ProvisioningRun.objects.select_related(
        "order__organisation", "order__sku__gpu", "created_by"), pk=pk)


def _run_context(request, run, swap_form=None) -> dict:
    progress = fulfilment_selectors.order_progress(run.order, run=run, log_lines=500, staff=True)
    failed_nodes = [n for n in progress.nodes if n.state in NODE_FAILED
                    or any(s.status == "failed" for s in n.steps)]
    swappable = run.kind == RunKind.PROVISION and run.status == RunStatus.FAILED
    eligible = list(inventory_selectors.eligible_nodes_for(run.order)) if swappable else []
    storage_failed = swappable and run.order.has_object_storage and run.steps.filter(
        step="storage", status="failed").exists()
    return {"run": run, "order": run.order, "progress": progress, "failed_nodes": failed_nodes,
            "storage_failed": storage_failed,
            "swappable": swappable, "swap_form": swap_form,
            "swap_choices": [("", "Pick automatically (same SKU and fabric)")] + [
                (n.pk, n.hostname + (f" · fabric {n.fabric_group}" if n.fabric_group else ""))
                for n in eligible],
            "other_runs": fulfilment_selectors.order_runs(run.order).exclude(pk=run.pk),
            "log_retention_days": settings.STEP_LOG_RETENTION_DAYS,
            "log_past_window": run_log_past_window(run, now=timezone.now())}


def _render_run(request, run, *, swap_form=None, status=200):
    return render(request, "staff/run.html", _run_context(request, run, swap_form), status=status)


# --- inventory --------------------------------------------------------------------------------
NODES_PER_PAGE = 50


@staff_required
@require_GET
def node_list(request):
    state, sku_slug = request.GET.get("state") or None, request.GET.get("sku") or None
    search = request.GET.get("q", "").strip()[:100]
    sku = ServerSKU.objects.filter(slug=sku_slug).first() if sku_slug else None
    nodes = inventory_selectors.nodes_for_operator(
        state=state if state in NodeState.values else None, sku=sku, search=search)
    page = Paginator(nodes, NODES_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "staff/nodes.html", {
        "nodes": page.object_list, "page": page, "q": search,
        "summary": inventory_selectors.inventory_summary(), "states": NodeState.choices,
        "skus": inventory_selectors.skus_in_fleet(),
        "state": state, "sku": sku, "can_edit": request.user.is_operator,
        "attention": alerted_node_ids(n.pk for n in page.object_list),
    })


@operator_only
@require_http_methods(["GET", "POST"])
def node_enrol(request):
    form = NodeEnrolForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            node = inventory_services.node_enrol(
                by=request.user, sku=data["sku"], hostname=data["hostname"],
                management_address=data["management_address"], driver=data["driver"],
                fabric_group=data["fabric_group"], nvme_devices=data["nvme_devices"],
                fabric_address=data["fabric_address"] or "", wipe_method=data["wipe_method"],
                driver_options=form.driver_options(), notes=data["notes"], ready=data["ready"])
        except EnrolmentRefused as exc:
            _add_problems(form, exc.problems)
        except DomainError as exc:
            form.add_error("hostname" if "named" in str(exc) else None, str(exc))
        else:
            messages.success(request, f"{node.hostname} enrolled" + (
                "; its reachability and health check is running, and it becomes ready if it passes."
                if data["ready"] else ", not in stock until it is checked and accepted."))
            return redirect("provisioning:node", pk=node.pk)
    return render(request, "staff/node_enrol.html", {"form": form},
                  status=400 if form.is_bound else 200)


@operator_only
@require_http_methods(["GET", "POST"])
def node_edit(request, pk: int):
    node = get_object_or_404(Node.objects.select_related("sku", "order"), pk=pk)
    form = NodeEditForm(request.POST or None, node=node)
    if request.method == "POST" and form.is_valid():
        try:
            inventory_services.node_update(node=node, by=request.user, **form.changes())
        except EnrolmentRefused as exc:
            _add_problems(form, exc.problems)
        except DomainError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"{node.hostname} updated.")
            return redirect("provisioning:node", pk=node.pk)
    return render(request, "staff/node_edit.html", {"form": form, "node": node},
                  status=400 if form.is_bound else 200)


def _add_problems(form, problems: dict[str, str]) -> None:
    for field, problem in problems.items():
        form.add_error(field if field in form.fields else None, problem)


@staff_required
@require_GET
def node_engine(request, pk: int):
    """The engine's word on the node, loaded after the page (the engine may be slow to answer)."""
    word = inventory_selectors.node_engine_word(get_object_or_404(Node, pk=pk))
    if word is None:
        raise Http404("This node has no imaging engine.")
    return render(request, "staff/_node_engine.html", {"word": word})


@staff_required
@require_GET
def node_detail(request, pk: int):
    node = get_object_or_404(Node.objects.select_related("sku__gpu", "order"), pk=pk)
    health = inventory_selectors.node_last_health(node)
    return render(request, "staff/node.html", {
        "node": node, "facts": inventory_selectors.node_facts(node),
        "events": inventory_selectors.node_events_page(node, older=request.GET.get("older"),
                                                       newer=request.GET.get("newer")),
        "health": health,
        "health_problems": operator_problems(node, health) if health else [],
        "steps": node.step_runs.select_related("run__order").order_by("-pk")[:15],
        "actions": _node_actions(node) if request.user.is_operator else [], "note_form": NodeNoteForm(),
        "can_edit": request.user.is_operator and node.order_id is None,
        "power_actions": (NODE_POWER_ACTIONS if request.user.is_operator
                          and node_power_refusal(node) is None else {}),
        "alerts": list(node.alerts.filter(resolved_at=None).order_by("-started_at")),
    })


NODE_ACTIONS = {  # transition → (service, button, message)
    "accept": (inventory_services.node_accept, "Check and accept into stock",
               "is being checked (reachability and health); it becomes ready if the check passes"),
    "enter_maintenance": (inventory_services.node_set_maintenance, "Put into maintenance",
                          "is in maintenance"),
    "return_to_service": (inventory_services.node_return_to_service, "Check and return to service",
                          "is being checked (reachability and health); it is back in stock if the "
                          "check passes"),
    "retire": (inventory_services.node_retire, "Retire from the fleet", "is retired"),
    "record_baseline": (inventory_services.node_record_baseline, "Record clean baseline (checked by hand)",
                        "is being listed; what it holds now becomes its clean baseline"),
}


@operator_only
@require_POST
def node_action(request, pk: int, action: str):
    node = get_object_or_404(Node, pk=pk)
    if action not in NODE_ACTIONS:
        raise Http404("No such action.")
    service, _, done = NODE_ACTIONS[action]
    form = NodeNoteForm(request.POST)
    try:
        service(node=node, by=request.user, note=form.cleaned_data["note"] if form.is_valid() else "")
        messages.success(request, f"{node.hostname} {done}.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("provisioning:node", pk=node.pk)


@operator_only
@require_POST
def node_power(request, pk: int, action: str):
    node = get_object_or_404(Node, pk=pk)
    if action not in NODE_POWER_ACTIONS:
        raise Http404("No such action.")
    if request.POST.get("confirm") != "yes":
        messages.error(request, "Nothing was sent: confirm the power action first.")
        return redirect("provisioning:node", pk=node.pk)
    form = NodeNoteForm(request.POST)
    try:
        inventory_services.node_power_request(node=node, by=request.user, action=action,
                                              note=form.cleaned_data["note"] if form.is_valid() else "")
        messages.success(request, f"{NODE_POWER_ACTIONS[action]} of {node.hostname} sent to its "
                                  f"BMC; the history shows when it is done.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("provisioning:node", pk=node.pk)


def _node_actions(node: Node) -> list[dict]:
    return [{"action": name, "label": label, "danger": name in ("enter_maintenance", "retire")}
            for name, (_, label, _) in NODE_ACTIONS.items()
            if (node.baseline_at is None if name == "record_baseline"
                else NODE_TRANSITIONS.get(name).allowed_from(node.state))]


# --- login lockouts (operators unlock) --------------------------------------------------------
@operator_only
@require_http_methods(["GET", "POST"])
def login_lockouts(request):
    if request.method == "POST":
        attempt = request.POST.get("attempt", "")
        if attempt.isdigit() and lockout_clear(attempt_id=int(attempt)):
            messages.success(request, "Unlocked: that username and address may log in again.")
        else:
            messages.warning(request, "That lockout had already ended.")
        return redirect("provisioning:login-lockouts")
    return render(request, "staff/login_lockouts.html", {
        "lockouts": lockouts_list(), "limit": settings.AXES_FAILURE_LIMIT, "minutes": lockout_minutes()})
