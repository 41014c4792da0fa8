"""The organisation's billing page: the month's cost by order, node and storage, with the
forecast to the month's end. Anyone who sees the organisation sees it (others: 404)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.accounts.selectors import can_manage_api_keys, organisations_for, primary_organisation
from portal.billing.documents import invoice_context, invoice_csv, invoice_pdf, usage_statement_csv
from portal.billing.forms import BillingProfileForm, SpendLimitForm
from portal.billing.models import BillingProfile, Invoice, SpendLimit
from portal.billing.profiles import billing_profile_save, can_edit_billing_profile
from portal.billing.selectors import (
    customer_months,
    month_of,
    month_parse,
    organisation_usage,
    price_basis,
    recent_months,
)
from portal.billing.spend import month_spend, spend_limit_set
from portal.catalog.selectors import resale_markup_for


@login_required
@require_GET
def billing_home(request):
    organisation = primary_organisation(request.user)
    if organisation is None:
        raise Http404("This login belongs to no organisation.")
    return redirect("billing:organisation", slug=organisation.slug)


@login_required
@require_GET
def organisation_billing(request, slug: str):
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    this_month = period = month_of(timezone.now())
    error = ""
    if request.GET.get("month"):
        try:
            period = month_parse(request.GET["month"])
        except ValueError as exc:
            error = str(exc)
    return render(request, "billing/organisation.html", {
        "organisation": organisation,
        "usage": organisation_usage(organisation, period=period,
                                    markup=price_basis(request.user, organisation)),
        "customers": customer_months(organisations_for(request.user).filter(parent=organisation),
                                     period=period),
        "error": error, "is_current": period == this_month, "months": recent_months(this_month),
        "invoices": (Invoice.objects.filter(organisation=organisation, state=Invoice.State.ISSUED)[:24]
                     if can_manage_api_keys(request.user, organisation) else None),
        **_limit_context(request, organisation),
    }, status=400 if error else 200)


def _limit_context(request, organisation, form=None) -> dict:
    limit = SpendLimit.objects.filter(organisation=organisation).first()
    return {"limit": limit, "can_set_limit": can_manage_api_keys(request.user, organisation),
            "limit_spent": month_spend(organisation) if limit else None,
            "limit_form": form or SpendLimitForm(initial={"monthly_usd": limit and limit.monthly_usd})}


@login_required
@require_POST
def spend_limit(request, slug: str):
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    if not can_manage_api_keys(request.user, organisation):
        raise PermissionDenied(f"Only an admin of {organisation.name} can set its spend limit.")
    form = SpendLimitForm(request.POST)
    if not form.is_valid():
        this_month = month_of(timezone.now())
        return render(request, "billing/organisation.html", {
            "organisation": organisation, "error": "",
            "usage": organisation_usage(organisation, markup=price_basis(request.user, organisation)),
            "is_current": True, "months": recent_months(this_month), "invoices": None,
            **_limit_context(request, organisation, form)}, status=400)
    limit = spend_limit_set(organisation=organisation, monthly_usd=form.cleaned_data["monthly_usd"])
    messages.success(request, f"Spend limit set to {limit.monthly_usd} USD per month." if limit
                     else "Spend limit removed.")
    return redirect("billing:organisation", slug=organisation.slug)


@login_required
@require_http_methods(["GET", "POST"])
def billing_profile(request, slug: str):
    """Who the organisation's invoices are made out to: its admins edit it, its other members
    read it (a POST from them: 403), others get 404."""
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    profile = BillingProfile.objects.filter(organisation=organisation).first()
    can_edit = can_edit_billing_profile(request.user, organisation)
    form = BillingProfileForm(instance=profile) if can_edit else None
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied(f"Only an admin of {organisation.name} can change its billing details.")
        form = BillingProfileForm(request.POST, instance=profile)
        if form.is_valid():
            billing_profile_save(organisation=organisation, by=request.user,
                                 **{name: form.cleaned_data[name] for name in form.Meta.fields})
            messages.success(request, "Billing details saved: invoices issued from now on use them; "
                                      "invoices already issued keep theirs.")
            return redirect("billing:profile", slug=organisation.slug)
    return render(request, "billing/profile.html", {
        "organisation": organisation, "profile": profile, "form": form,
    }, status=400 if form is not None and form.errors else 200)


def _issued_invoice(request, slug: str, number: str) -> Invoice:
    """An issued document of an organisation the user sees (others: 404), for its admins (403
    for its other members: a reseller's plain member)."""
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    invoice = get_object_or_404(Invoice.objects.select_related("organisation", "credit_for"),
                                organisation=organisation, number=number, state=Invoice.State.ISSUED)
    if not can_manage_api_keys(request.user, organisation):
        raise PermissionDenied(f"Only an admin of {organisation.name} can read its invoices.")
    return invoice


@login_required
@require_GET
def invoice_detail(request, slug: str, number: str):
    invoice = _issued_invoice(request, slug, number)
    return render(request, "billing/invoice.html", {
        **invoice_context(invoice), "credit_notes": invoice.credit_notes.filter(state="issued")})


@login_required
@require_GET
def invoice_pdf_download(request, slug: str, number: str):
    invoice = _issued_invoice(request, slug, number)
    response = HttpResponse(invoice_pdf(invoice), content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="{invoice.number}.pdf"'
    return response


@login_required
@require_GET
def invoice_csv_download(request, slug: str, number: str):
    invoice = _issued_invoice(request, slug, number)
    response = HttpResponse(invoice_csv(invoice), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{invoice.number}.csv"'
    return response


@login_required
@require_GET
def usage_statement(request, slug: str):
    """The month's usage of an organisation as CSV; a reseller's customer's at the reseller's
    selling prices (the reseller re-bills its customer from it)."""
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    try:
        period = month_parse(request.GET["month"]) if request.GET.get("month") else None
    except ValueError as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    usage = organisation_usage(organisation, period=period, markup=resale_markup_for(organisation))
    response = HttpResponse(usage_statement_csv(organisation, usage), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (f'attachment; filename="{organisation.slug}-'
                                       f'{usage.period.start:%Y-%m}.csv"')
    return response
