"""An issued invoice or credit note as a document: HTML and PDF from one template
(``billing/_invoice.html``; the PDF through WeasyPrint), and CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from django.conf import settings
from django.template.loader import render_to_string

from portal.billing.models import Invoice

PDF_STYLE = Path(__file__).with_name("invoice_pdf.css")  # a file: the pages allow no inline style


def invoice_context(invoice: Invoice) -> dict:
    """An issued document shows the details copied onto it; a draft today's issuer."""
    return {"invoice": invoice, "lines": list(invoice.lines.all()),
            "issuer": invoice.issuer_details or settings.BILLING_ISSUER, "customer": invoice.customer}


def invoice_pdf(invoice: Invoice) -> bytes:
    import weasyprint  # noqa: PLC0415 (heavy: loaded by the one view that renders PDFs)

    html = render_to_string("billing/invoice_pdf.html", invoice_context(invoice))
    return weasyprint.HTML(string=html).write_pdf(stylesheets=[weasyprint.CSS(filename=str(PDF_STYLE))])


def invoice_csv(invoice: Invoice) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["document", "number", "issued_at", "month", "line", "description", "hours",
                     "amount", "currency"])
    head = [invoice.get_kind_display(), invoice.number or "",
            invoice.issued_at.isoformat() if invoice.issued_at else "", f"{invoice.period_start:%Y-%m}"]
    for n, line in enumerate(invoice.lines.all(), start=1):
        writer.writerow([*head, n, line.description, line.quantity, line.amount, invoice.currency])
    writer.writerow([*head, "", "Subtotal", "", invoice.subtotal, invoice.currency])
    writer.writerow([*head, "", f"Tax {invoice.tax_rate}% {invoice.tax_note}".strip(), "", invoice.tax,
                     invoice.currency])
    writer.writerow([*head, "", "Total", "", invoice.total, invoice.currency])
    return out.getvalue()


def usage_statement_csv(organisation, usage) -> str:
    """A month's usage of one organisation (e.g. a reseller's customer, to re-bill): a row per
    order meter at the prices of ``usage`` (a reseller's customer's: the reseller's selling
    prices), and the total."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["organisation", "month", "order", "item", "billed_hours", "amount", "currency"])
    month = f"{usage.period.start:%Y-%m}"
    for order, cost in usage.orders:
        for meter in cost.meters:
            writer.writerow([organisation.name, month, order.reference, meter.label, meter.units,
                             meter.so_far, "USD"])
    writer.writerow([organisation.name, month, "", "Total", "", usage.so_far, "USD"])
    return out.getvalue()
