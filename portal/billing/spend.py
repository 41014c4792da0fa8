"""Spend limits: an organisation's limit per month, alerts at 50/80/100 % (e-mail and webhook
``spend.threshold``, once per threshold and month), and the hold on new orders at 100 %."""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.accounts.models import Organisation
from portal.billing.mail_tasks import spend_alert_notify_task
from portal.billing.models import SpendAlert, SpendLimit
from portal.billing.selectors import month_of, usage_costs
from portal.catalog.pricing import money
from portal.catalog.selectors import resale_markup_for
from portal.core.states import DomainError
from portal.orders.models import Order
from portal.orders.states import OrderState
from portal.webhooks.events import EventType
from portal.webhooks.publish import event_publish

logger = logging.getLogger(__name__)
THRESHOLDS = (50, 80, 100)


def spend_limit_set(*, organisation: Organisation, monthly_usd, by=None) -> SpendLimit | None:
    """Sets (or with None/0 removes) the organisation's monthly limit."""
    if monthly_usd in (None, "", 0):
        SpendLimit.objects.filter(organisation=organisation).delete()
        return None
    amount = money(monthly_usd)
    if amount <= 0:
        raise DomainError("A spend limit is a positive amount in USD per month.")
    limit, _ = SpendLimit.objects.update_or_create(organisation=organisation,
                                                   defaults={"monthly_usd": amount})
    return limit


def month_spend(organisation: Organisation, *, at: datetime | None = None) -> Decimal:
    """This month's spend as the organisation reads it: a reseller's customer at its reseller's
    selling prices (what its usage and prices show it), anyone else at the ledger's rates."""
    costs = usage_costs(organisation_id=organisation.pk, at=at, markup=resale_markup_for(organisation))
    return money(sum((c.so_far for c in costs), Decimal(0)))


def spend_limit_reached(organisation: Organisation, *, at: datetime | None = None) -> bool:
    limit = SpendLimit.objects.filter(organisation=organisation).first()
    return limit is not None and month_spend(organisation, at=at) >= limit.monthly_usd


def spend_check(*, organisation: Organisation, at: datetime | None = None) -> list[int]:
    """Records and announces each threshold this month's spend has reached for the first time;
    returns them. Safe to run often and at once: the alert row is unique per threshold."""
    at = at or timezone.now()
    limit = SpendLimit.objects.filter(organisation=organisation).first()
    if limit is None:
        return []
    spent = month_spend(organisation, at=at)
    month = month_of(at).start.date()
    sent = []
    for threshold in THRESHOLDS:
        if spent * 100 < limit.monthly_usd * threshold:
            break
        try:
            with transaction.atomic():
                alert = SpendAlert.objects.create(organisation=organisation, month=month,
                                                  threshold=threshold, spent_usd=spent,
                                                  limit_usd=limit.monthly_usd)
                data = {"organisation": organisation.slug, "month": f"{month:%Y-%m}",
                        "threshold_percent": threshold, "spent_usd": str(spent),
                        "limit_usd": str(limit.monthly_usd),
                        "orders_held": threshold >= 100}
                event_publish(organisation=organisation, type=EventType.SPEND_THRESHOLD, data=data)
                transaction.on_commit(lambda pk=alert.pk: _queue_mail(pk))
        except IntegrityError:
            continue  # alerted before (or by a concurrent check)
        sent.append(threshold)
    return sent


def _queue_mail(alert_id: int) -> None:
    try:
        spend_alert_notify_task.delay(alert_id)
    except Exception:  # the alert row stands; a broker outage is logged
        logger.exception("could not queue the spend alert e-mail", extra={"alert": alert_id})


def spend_check_all(*, at: datetime | None = None) -> int:
    """Every organisation with a limit (beat task)."""
    return sum(len(spend_check(organisation=limit.organisation, at=at))
               for limit in SpendLimit.objects.select_related("organisation"))


def spend_holds():
    """Orders waiting for approval because their organisation's spend limit was reached."""
    return (Order.objects.filter(state=OrderState.PENDING_APPROVAL, events__transition="spend_hold")
            .select_related("organisation", "sku").distinct().order_by("created_at")[:200])
