"""Spend limits: alerts at 50/80/100 % once per threshold and month (e-mail and webhook), and
at 100 % a new order that the policy would approve automatically waits for staff."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from portal.billing import spend
from portal.billing.models import SpendAlert, SpendLimit
from portal.billing.notifications import spend_alert_notify
from portal.billing.selectors import month_of
from portal.billing.services import usage_sync
from portal.catalog.models import ServerSKU
from portal.core.states import DomainError
from portal.orders.models import OrderEvent
from portal.orders.states import OrderState
from portal.webhooks.models import WebhookEvent
from portal.webhooks.services import endpoint_create
from tests.factories import L4_SKU, make_node, make_order, metered_order, submitted_order


def at(*args):
    return datetime(*args, tzinfo=UTC)


MARCH_2 = at(2026, 3, 2)


def _hours(org, hours, start=MARCH_2):
    return metered_order(org, hours, start=start)


def test_each_threshold_is_announced_once_per_month(catalog, people, queued, mailoutbox,
                                                    django_capture_on_commit_callbacks):
    endpoint_create(organisation=people.acme, url="https://hooks.example.com/in")
    order = _hours(people.acme, 10)  # 10 h × the H100 hourly rate
    spend.spend_limit_set(organisation=people.acme, monthly_usd=order.price_hourly * 12)
    with django_capture_on_commit_callbacks(execute=True):
        assert spend.spend_check(organisation=people.acme, at=at(2026, 3, 20)) == [50, 80]
    assert spend.spend_check(organisation=people.acme, at=at(2026, 3, 21)) == []
    assert [e.data["threshold_percent"] for e in WebhookEvent.objects.filter(type="spend.threshold")
            .order_by("pk")] == [50, 80]
    assert len(queued) == 2
    assert spend_alert_notify(alert_id=queued[0]) == 1
    assert "50 % of its monthly limit" in mailoutbox[0].body
    _hours(people.acme, 3, start=at(2026, 3, 25))
    assert spend.spend_check(organisation=people.acme, at=at(2026, 3, 28)) == [100]
    assert spend.spend_limit_reached(people.acme, at=at(2026, 3, 28))
    # A new month starts again from nothing.
    assert spend.spend_check(organisation=people.acme, at=at(2026, 4, 2)) == []
    assert SpendAlert.objects.filter(organisation=people.acme).count() == 3


def test_without_a_limit_nothing_happens_and_bad_limits_are_refused(catalog, people, queued):
    _hours(people.acme, 10)
    assert spend.spend_check(organisation=people.acme, at=at(2026, 3, 20)) == []
    with pytest.raises(DomainError, match="positive"):
        spend.spend_limit_set(organisation=people.acme, monthly_usd="-5")
    spend.spend_limit_set(organisation=people.acme, monthly_usd="100")
    assert spend.spend_limit_set(organisation=people.acme, monthly_usd=None) is None
    assert not SpendLimit.objects.filter(organisation=people.acme).exists()


def test_at_100_percent_a_new_order_waits_for_staff(catalog, people, sim_dir, queued):
    ServerSKU.objects.filter(slug=L4_SKU).update(approval_policy=ServerSKU.ApprovalPolicy.AUTO_SMALL)
    earlier = make_order(people.acme, state=OrderState.VERIFYING)
    OrderEvent.objects.create(order=earlier, transition="activate", from_state="verifying",
                              to_state="active")
    make_node(sku=L4_SKU, state_dir=sim_dir)
    now = timezone.now()
    running = make_order(people.acme, state=OrderState.ACTIVE)
    usage_sync(order=running, nodes={1: "gpu-1"}, storage=False,
               at=max(now - timedelta(minutes=30), month_of(now).start), cause="t")
    spend.spend_limit_set(organisation=people.acme, monthly_usd=Decimal("1.00"))
    order = submitted_order(people, sku=L4_SKU, network="eth-10g")
    assert order.state == OrderState.PENDING_APPROVAL
    assert order.events.get(transition="spend_hold").note.startswith("the organisation's monthly spend")
    running.refresh_from_db()
    assert running.state == OrderState.ACTIVE  # running servers are not touched
    assert list(spend.spend_holds()) == [order]
    spend.spend_limit_set(organisation=people.acme, monthly_usd=None)
    second = submitted_order(people, sku=L4_SKU, network="eth-10g")
    assert second.state == OrderState.APPROVED


def test_an_admin_sets_the_limit_on_the_billing_page_an_outsider_cannot(catalog, people, login):
    client = login(people.alice)
    url = f"/billing/{people.acme.slug}/limit/"
    bad = client.post(url, {"monthly_usd": "-3"})
    assert bad.status_code == 400 and "greater than or equal to 1" in bad.content.decode()
    response = client.post(url, {"monthly_usd": "2500"}, follow=True)
    assert "Spend limit set to 2500.00 USD per month." in response.content.decode()
    assert SpendLimit.objects.get(organisation=people.acme).monthly_usd == Decimal("2500.00")
    assert login(people.charlie).post(url, {"monthly_usd": "1"}).status_code == 404
    client = login(people.alice)
    client.post(url, {"monthly_usd": ""})
    assert not SpendLimit.objects.filter(organisation=people.acme).exists()
