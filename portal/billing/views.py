"""The organisation's billing page: the month's cost by order, node and storage, with the
forecast to the month's end. Anyone who sees the organisation sees it (others: 404)."""

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from portal.accounts.selectors import organisations_for, primary_organisation
from portal.billing.selectors import month_of, month_parse, organisation_usage, recent_months


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
        "organisation": organisation, "usage": organisation_usage(organisation, period=period),
        "error": error, "is_current": period == this_month, "months": recent_months(this_month),
    }, status=400 if error else 200)
