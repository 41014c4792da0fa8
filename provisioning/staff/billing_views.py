"""Billing's staff pages under /ops/billing/ (operators): drafts to review and finalise, issued
documents, credit notes, closing last month by hand. Each action is a ``portal.billing`` service
that writes an audit row; URLs in ``provisioning.staff.billing_urls`` (namespace
``billing-staff``), templates in ``templates/staff/billing*.html``."""

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from portal.billing import invoices
from portal.billing.documents import invoice_context
from portal.billing.forms import CreditNoteForm
from portal.billing.models import Invoice
from portal.billing.spend import spend_holds
from portal.core.staff import operator_only
from portal.core.states import DomainError


@operator_only
@require_GET
def staff_billing(request):
    documents = Invoice.objects.select_related("organisation", "credit_for")
    return render(request, "staff/billing.html", {
        "drafts": documents.filter(state=Invoice.State.DRAFT).order_by("period_start", "pk")[:200],
        "issued": documents.filter(state=Invoice.State.ISSUED).order_by("-issued_at")[:50],
        "last_month": invoices.previous_month(timezone.now()),
        "holds": spend_holds(),
    })


@operator_only
@require_GET
def staff_invoice(request, pk: int):
    invoice = get_object_or_404(Invoice.objects.select_related("organisation", "credit_for"), pk=pk)
    return render(request, "staff/billing_invoice.html", {
        **invoice_context(invoice), "events": invoice.events.select_related("actor"),
        "credit_form": CreditNoteForm() if invoice.is_issued and invoice.kind == "invoice" else None,
        "credit_notes": invoice.credit_notes.all()})


@operator_only
@require_POST
def staff_invoice_finalise(request, pk: int):
    invoice = get_object_or_404(Invoice, pk=pk)
    try:
        invoice = invoices.invoice_finalise(invoice=invoice, by=request.user)
        messages.success(request, f"Issued as {invoice.number}; the customer is e-mailed.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("billing-staff:invoice", pk=invoice.pk)


@operator_only
@require_POST
def staff_credit_note(request, pk: int):
    invoice = get_object_or_404(Invoice, pk=pk)
    form = CreditNoteForm(request.POST)
    if form.is_valid():
        try:
            note = invoices.credit_note_create(invoice=invoice, by=request.user, **form.cleaned_data)
            messages.success(request, "Credit note drafted: review it, then finalise it.")
            return redirect("billing-staff:invoice", pk=note.pk)
        except DomainError as exc:
            form.add_error(None, str(exc))
    return render(request, "staff/billing_invoice.html", {
        **invoice_context(invoice), "events": invoice.events.select_related("actor"),
        "credit_form": form, "credit_notes": invoice.credit_notes.all()}, status=400)


@operator_only
@require_POST
def staff_close_month(request):
    period = invoices.previous_month(timezone.now())
    count = len(invoices.month_close(period=period, by=request.user))
    messages.success(request, f"{period.label}: {count} invoice(s) drafted or brought up to date.")
    return redirect("billing-staff:home")
