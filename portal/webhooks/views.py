"""An organisation's webhook endpoints on its pages: list, add (the signing secret shown once),
change, enable or disable, rotate the secret, send a test, delete, and the delivery log. The
same services and selectors as /api/v1/webhooks; outsiders get 404, people who may not change
the organisation's endpoints (a reseller's plain member) 403 on every change."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from portal.accounts.selectors import can_manage_api_keys, organisations_for
from portal.core.forms import add_service_errors
from portal.core.shown_once import keep_for_next_page, pop_shown_once
from portal.webhooks.events import SUBSCRIBABLE
from portal.webhooks.forms import WebhookForm
from portal.webhooks.publish import endpoint_test_send
from portal.webhooks.selectors import deliveries_of, endpoints_visible_to
from portal.webhooks.services import (
    endpoint_create,
    endpoint_delete,
    endpoint_rotate_secret,
    endpoint_update,
)

NEW_SECRET_SESSION = "accounts.new_webhook_secret"  # encrypted; popped by the page that shows it
DELIVERIES_SHOWN = 20


def _organisation(request, slug: str, *, change: str = ""):
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    if change and not can_manage_api_keys(request.user, organisation):
        raise PermissionDenied(f"Only an admin of {organisation.name} can {change}.")
    return organisation


def _endpoint(request, slug: str, reference: str, *, change: str = ""):
    organisation = _organisation(request, slug, change=change)
    return organisation, get_object_or_404(endpoints_visible_to(request.user, organisation),
                                           reference=reference)


def _remember_secret(request, reference: str, secret: str) -> None:
    keep_for_next_page(request, NEW_SECRET_SESSION, f"{reference} {secret}")


def _secret_shown_once(request, reference: str) -> str | None:
    kept = pop_shown_once(request, NEW_SECRET_SESSION)
    if kept is None:
        return None
    owner, secret = kept.split(" ", 1)
    return secret if owner == reference else None


@login_required
@require_http_methods(["GET", "POST"])
def webhook_list(request, slug: str):
    organisation = _organisation(request, slug, change="add webhook endpoints"
                                 if request.method == "POST" else "")
    form = WebhookForm(request.POST or None)
    if form.is_valid():
        try:
            endpoint, secret = endpoint_create(organisation=organisation, **form.cleaned_data)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:  # post/redirect/get: a reload shows the secret's page, it adds no second endpoint
            _remember_secret(request, endpoint.reference, secret)
            return redirect("accounts:webhook", slug=slug, reference=endpoint.reference)
    return render(request, "accounts/webhooks.html", {
        "organisation": organisation, "endpoints": endpoints_visible_to(request.user, organisation),
        "form": form, "can_manage": can_manage_api_keys(request.user, organisation),
        "event_count": len(SUBSCRIBABLE)},
        status=400 if form.is_bound else 200)


@never_cache  # may show the signing secret, once
@login_required
@require_http_methods(["GET", "POST"])
def webhook_detail(request, slug: str, reference: str):
    organisation, endpoint = _endpoint(request, slug, reference, change="change its webhook endpoints"
                                       if request.method == "POST" else "")
    form = WebhookForm(request.POST or None, initial={
        "url": endpoint.url, "event_types": endpoint.event_types, "description": endpoint.description})
    if form.is_valid():
        try:
            endpoint_update(endpoint=endpoint, **form.cleaned_data)
        except ValidationError as exc:
            add_service_errors(form, exc)
            endpoint.refresh_from_db()
        else:
            messages.success(request, f"Endpoint {endpoint.reference} saved.")
            return redirect("accounts:webhook", slug=slug, reference=reference)
    return render(request, "accounts/webhook.html", {
        "organisation": organisation, "endpoint": endpoint, "form": form,
        "secret": _secret_shown_once(request, reference),
        "deliveries": deliveries_of(endpoint)[:DELIVERIES_SHOWN],
        "can_manage": can_manage_api_keys(request.user, organisation)},
        status=400 if form.is_bound else 200)


@login_required
@require_POST
def webhook_action(request, slug: str, reference: str, action: str):
    """enable, disable, rotate (a new secret, shown once), test (a webhook.test event now)."""
    _, endpoint = _endpoint(request, slug, reference, change="change its webhook endpoints")
    if action == "rotate":
        _remember_secret(request, reference, endpoint_rotate_secret(endpoint=endpoint))
        messages.success(request, "New signing secret made; deliveries use it from the next attempt on.")
    elif action == "test" and not endpoint.enabled:
        messages.error(request, "This endpoint is disabled; enable it, then send the test.")
    elif action == "test":
        endpoint_test_send(endpoint=endpoint)
        messages.success(request, "Test event queued; it shows in the deliveries below within seconds.")
    else:
        endpoint_update(endpoint=endpoint, enabled=action == "enable")
        messages.success(request, f"Endpoint {'enabled' if endpoint.enabled else 'disabled'}.")
    return redirect("accounts:webhook", slug=slug, reference=reference)


@login_required
@require_POST
def webhook_delete(request, slug: str, reference: str):
    _, endpoint = _endpoint(request, slug, reference, change="delete its webhook endpoints")
    if request.POST.get("confirm") != "yes":
        messages.error(request, f"Endpoint {reference} was not deleted: confirm it first.")
        return redirect("accounts:webhook", slug=slug, reference=reference)
    endpoint_delete(endpoint=endpoint)
    messages.success(request, f"Endpoint {reference} deleted; it receives nothing more.")
    return redirect(reverse("accounts:webhooks", args=[slug]))
