"""A reseller's pages: its customer organisations (list, create, rename) and the prices it
charges them beside its cost. They call the services the API calls (``customer_create``,
``customer_update``, ``resale_prices_set``); outsiders get 404, a reseller's plain member 403."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from portal.accounts.models import Organisation
from portal.accounts.selectors import can_manage_api_keys, customers_visible_to, organisations_for
from portal.accounts.services import customer_create, customer_update
from portal.catalog.selectors import resale_list_of, resale_markup, resale_rows
from portal.catalog.services import resale_prices_drop, resale_prices_set
from portal.core.forms import add_service_errors
from portal.reseller.forms import CustomerForm, CustomerRenameForm, ResalePricesForm
from portal.sizing.catalog_live import price_list_for


def _reseller(request, slug: str, *, what: str) -> Organisation:
    """The reseller ``slug`` for one of its admins: 404 for anyone who does not see it (or when
    it is no reseller), 403 for its other members."""
    organisation = get_object_or_404(organisations_for(request.user), slug=slug,
                                     kind=Organisation.Kind.RESELLER)
    if not can_manage_api_keys(request.user, organisation):
        raise PermissionDenied(f"Only an admin of {organisation.name} can {what}.")
    return organisation


@login_required
@require_http_methods(["GET", "POST"])
def customer_list(request, slug: str):
    reseller = _reseller(request, slug, what="see and add its customers")
    form = CustomerForm(request.POST or None)
    if form.is_valid():
        try:
            customer = customer_create(reseller=reseller, **form.cleaned_data)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"Customer “{customer.name}” created. Invite its people from "
                                      f"its page, or place orders for it.")
            return redirect("accounts:customers", slug=slug)
    return render(request, "accounts/customers.html", {
        "organisation": reseller, "customers": customers_visible_to(request.user, reseller),
        "form": form}, status=400 if form.is_bound else 200)


@login_required
@require_http_methods(["GET", "POST"])
def customer_edit(request, slug: str, customer_slug: str):
    reseller = _reseller(request, slug, what="rename its customers")
    customer = get_object_or_404(customers_visible_to(request.user, reseller), slug=customer_slug)
    form = CustomerRenameForm(request.POST or None, initial={"name": customer.name})
    if form.is_valid():
        try:
            customer_update(customer=customer, name=form.cleaned_data["name"])
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"Customer renamed to “{customer.name}”.")
            return redirect("accounts:customers", slug=slug)
    return render(request, "accounts/customer_edit.html", {
        "organisation": reseller, "customer": customer, "form": form},
        status=400 if form.is_bound else 200)


@login_required
@require_http_methods(["GET", "POST"])
def resale_prices(request, slug: str):
    """Per server and storage provider: the reseller's cost, its customers' price and its margin
    side by side, and the markups it sets (for every customer, or ``?customer=`` one)."""
    reseller = _reseller(request, slug, what="see and set its customers' prices")
    customer = _customer_of(request, reseller)
    saved = resale_list_of(reseller, customer) or (resale_list_of(reseller) if customer else None)
    own = {item.key: item.percent for item in saved.items.all()} if saved else {}
    servers, storage = resale_rows(cost_list=price_list_for(reseller), markup=resale_markup(saved), own=own)
    keys = [row.key for row in (*servers, *storage)]
    form = ResalePricesForm(request.POST or None, keys=keys,
                            initial={"percent": saved.percent if saved else 0, **own})
    if form.is_valid():
        try:
            resale_prices_set(reseller=reseller, customer=customer, by=request.user,
                              percent=form.cleaned_data["percent"], items=form.items())
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"Prices for {customer.name if customer else 'your customers'} saved.")
            return redirect(_prices_url(reseller, customer))
    return render(request, "accounts/resale_prices.html", {
        "organisation": reseller, "customer": customer, "saved": saved, "form": form,
        "servers": [(row, form[row.key]) for row in servers],
        "storage": [(row, form[row.key]) for row in storage],
        "customers": customers_visible_to(request.user, reseller),
        "own_list": bool(customer and saved and saved.customer_id),
    }, status=400 if form.is_bound else 200)


@login_required
@require_http_methods(["POST"])
def resale_prices_reset(request, slug: str):
    reseller = _reseller(request, slug, what="set its customers' prices")
    customer = _customer_of(request, reseller)
    if customer is None:
        raise Http404("Name the customer whose own prices to drop.")
    resale_prices_drop(reseller=reseller, customer=customer)
    messages.success(request, f"{customer.name} now pays your prices for every customer.")
    return redirect(_prices_url(reseller, customer))


def _customer_of(request, reseller):
    chosen = request.GET.get("customer", "")
    if not chosen:
        return None
    return get_object_or_404(customers_visible_to(request.user, reseller), slug=chosen)


def _prices_url(reseller, customer) -> str:
    url = reverse("accounts:resale-prices", args=[reseller.slug])
    return f"{url}?customer={customer.slug}" if customer else url
