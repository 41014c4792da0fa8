"""E-mail to the organisation when an invoice or credit note is issued: its number, total, and
where to download it. Sent once: the event row records it."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from portal.billing.models import BillingProfile, Invoice, InvoiceEvent, SpendAlert
from portal.core import mail
from portal.webhooks.notifications import admin_emails


def invoice_issued_notify(*, invoice_id: int) -> int:
    with transaction.atomic():
        invoice = Invoice.objects.select_related("organisation").filter(pk=invoice_id).first()
        if invoice is None or not invoice.is_issued:
            return 0
        if InvoiceEvent.objects.filter(invoice=invoice, transition="mailed").exists():
            return 0  # a redelivered task sends nothing
        profile = BillingProfile.objects.filter(organisation=invoice.organisation).first()
        to = [profile.email] if profile and profile.email else admin_emails(invoice.organisation)
        if not to:
            return 0
        url = settings.SITE_URL + reverse("billing:invoice", args=[invoice.organisation.slug,
                                                                   invoice.number])
        what = invoice.get_kind_display().lower()
        lines = [f"Your {what} {invoice.number} from {invoice.issuer_details.get('name', '')} is issued.",
                 "", f"Total: {invoice.total} {invoice.currency}"
                     f"{' (credited)' if invoice.total < 0 else ''}",
                 f"Month: {invoice.period_start:%B %Y}", "",
                 f"View or download it (HTML, PDF, CSV): {url}"]
        if invoice.tax_note:
            lines += ["", invoice.tax_note]
        sent = mail.send(subject=f"[Trainyard] {invoice.get_kind_display()} {invoice.number}",
                         body="\n".join(lines), to=to)
        InvoiceEvent.objects.create(invoice=invoice, transition="mailed", from_state=invoice.state,
                                    to_state=invoice.state, note=f"e-mailed to {', '.join(to)} "
                                                                 f"at {timezone.now():%Y-%m-%d %H:%M}")
    return sent


def spend_alert_notify(*, alert_id: int) -> int:
    """The spend alert's e-mail to the organisation's admins (a redelivery may send it twice;
    the alert itself is recorded once)."""
    alert = SpendAlert.objects.select_related("organisation").filter(pk=alert_id).first()
    if alert is None:
        return 0
    org = alert.organisation
    lines = [f"{org.name} has spent {alert.spent_usd} USD in {alert.month:%B %Y} (UTC), "
             f"{alert.threshold} % of its monthly limit of {alert.limit_usd} USD."]
    if alert.threshold >= 100:
        lines.append("New orders now wait for our staff's approval; running servers keep running.")
    lines.append(f"Usage by order: {settings.SITE_URL}{reverse('billing:organisation', args=[org.slug])}")
    return mail.send(subject=f"[Trainyard] Spend at {alert.threshold} % of your limit",
                     body="\n\n".join(lines), to=admin_emails(org))
