"""E-mail to an organisation's admins when its webhook endpoint was disabled (sent after commit)."""

from __future__ import annotations

import logging

from django.conf import settings

from portal.accounts.models import Membership
from portal.core import mail
from portal.webhooks.models import WebhookEndpoint

logger = logging.getLogger(__name__)


def admin_emails(organisation) -> list[str]:
    """Its reseller admins; an organisation without that role (a customer) tells every member."""
    members = Membership.objects.filter(organisation=organisation, user__is_active=True).exclude(
        user__email="").select_related("user")
    admins = [m for m in members if m.role == Membership.Role.RESELLER_ADMIN]
    return sorted({m.user.email for m in (admins or members)})


def endpoint_disabled_notify(*, endpoint_id: int) -> int:
    endpoint = (WebhookEndpoint.objects.select_related("organisation").filter(pk=endpoint_id)
                .first())
    if endpoint is None or endpoint.enabled:
        return 0
    to = admin_emails(endpoint.organisation)
    if not to:
        return 0
    lines = [f"Trainyard stopped sending events to your webhook endpoint {endpoint.reference}",
             f"({endpoint.url}).", "", endpoint.disabled_reason, "",
             "Fix the receiver, then enable the endpoint again (PATCH /api/v1/webhooks/"
             f"{endpoint.reference} with {{\"enabled\": true}}); its delivery log shows each "
             "attempt's status code and error.", "", f"{settings.SITE_URL}"]
    try:
        return mail.send(subject=f"[Trainyard] Webhook endpoint {endpoint.reference} disabled",
                         body="\n".join(lines), to=to)
    except Exception:  # the endpoint stays disabled; a mail outage must not hide that
        logger.exception("webhook e-mail failed", extra={"endpoint": endpoint.reference})
        return 0
