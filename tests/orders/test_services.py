"""Placing orders, the customer's e-mails and who sees which order (order services)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.catalog.models import ServerSKU
from portal.core.states import DomainError
from portal.orders.models import OrderEvent
from portal.orders.selectors import orders_for
from portal.orders.services import order_place
from portal.orders.states import OrderState, QuoteAlreadyOrdered
from provisioning.fulfilment.approvals import order_approve, order_reject
from provisioning.fulfilment.orders import order_cancel
from provisioning.inventory.allocation import reservations_expire
from tests.factories import H100_SKU, L4_SKU, make_node, make_order, make_quote, submitted_order


def _auto_small(slug=L4_SKU):
    ServerSKU.objects.filter(slug=slug).update(approval_policy=ServerSKU.ApprovalPolicy.AUTO_SMALL)


def _make_existing_customer(org):
    earlier = make_order(org, state=OrderState.VERIFYING)
    OrderEvent.objects.create(order=earlier, transition="activate", from_state="verifying",
                              to_state="active")


class TestPlace:
    def test_it_copies_configuration_plan_and_prices_from_the_quote(self, catalog, people):
        quote = make_quote(people.acme, by=people.alice, node_count=2, storage="minio", storage_tb=5)
        order = order_place(quote=quote, by=people.alice)
        assert order.state == OrderState.DRAFT
        assert (order.sku, order.node_count, order.nvme, order.network) == (
            quote.sku, 2, quote.nvme, quote.network)
        assert (order.storage_provider, order.storage_tb) == (quote.storage_provider, 5)
        assert order.plan == quote.plan and order.price_lines == quote.price_lines
        assert (order.price_hourly, order.price_monthly) == (quote.price_hourly, quote.price_monthly)
        assert order.organisation == people.acme and order.placed_by == people.alice
        assert order.events.get().note == f"placed from quote {quote.reference}"

    def test_a_quote_with_a_live_order_is_not_ordered_again(self, catalog, people):
        quote = make_quote(people.acme, by=people.alice)
        first = order_place(quote=quote, by=people.alice)
        with pytest.raises(QuoteAlreadyOrdered, match=f"already ordered as {first.reference}"):
            order_place(quote=quote, by=people.alice)
        order_cancel(order=first, by=people.alice)
        assert order_place(quote=quote, by=people.alice).pk != first.pk  # cancelled: may re-order

    def test_it_refuses_an_expired_quote(self, catalog, people):
        quote = make_quote(people.acme, valid_days=-1)
        with pytest.raises(DomainError, match=f"Quote {quote.reference} expired on"):
            order_place(quote=quote, by=people.alice)

    def test_it_refuses_a_quote_of_another_organisation(self, catalog, people):
        quote = make_quote(people.outsider_org)
        with pytest.raises(DomainError, match="belongs to another organisation"):
            order_place(quote=quote, by=people.alice)
        with pytest.raises(DomainError, match="belongs to another organisation"):
            order_place(quote=make_quote(people.acme), by=people.alice,
                        organisation=people.outsider_org)

    def test_a_reseller_admin_orders_for_its_customer(self, catalog, people):
        order = order_place(quote=make_quote(people.client_org), by=people.rita)
        assert order.organisation == people.client_org


@pytest.mark.usefixtures("emails_inline")
class TestCustomerEmails:
    """Order e-mails go to the customer: no node hostnames, no staff notes."""

    def test_the_approval_mail_names_no_node_and_no_staff_note(
            self, catalog, people, sim_dir, mailoutbox, django_capture_on_commit_callbacks):
        make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-rack7-u12")
        order = submitted_order(people)
        with django_capture_on_commit_callbacks(execute=True):
            order_approve(order=order, by=people.sam, note="new customer, watch the first invoice")
        approved = [m for m in mailoutbox if m.subject.endswith(": Approved")]
        assert len(approved) == 1
        body = approved[0].body
        assert "servers are reserved for you" in body
        assert "gpu-rack7-u12" not in body and "watch the first invoice" not in body
        assert "gpu-rack7-u12" in order.events.get(to_state="approved").note  # staff still see it

    def test_the_reservation_expiry_mail_says_it_in_customer_words(
            self, catalog, people, sim_dir, mailoutbox, django_capture_on_commit_callbacks):
        make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-rack7-u13")
        order = order_approve(order=submitted_order(people), by=people.sam)
        mailoutbox.clear()
        with django_capture_on_commit_callbacks(execute=True):
            assert reservations_expire(now=timezone.now() + timedelta(hours=2)) == [order.reference]
        assert len(mailoutbox) == 1
        body = mailoutbox[0].body
        assert "went back to stock because setup did not start in time" in body
        assert "approve again" not in body and "gpu-rack7-u13" not in body
        assert order.events.get(transition="expire_reservation").note.endswith("approve again.")

    def test_the_rejection_reason_is_for_the_customer(
            self, catalog, people, mailoutbox, django_capture_on_commit_callbacks):
        order = submitted_order(people)
        with django_capture_on_commit_callbacks(execute=True):
            order_reject(order=order, by=people.sam, reason="No InfiniBand capacity until March.")
        assert "Reason: No InfiniBand capacity until March." in mailoutbox[-1].body


class TestTenancy:
    def test_orders_for_scopes_by_organisation(self, catalog, people):
        mine = make_order(people.acme)
        theirs = make_order(people.outsider_org)
        client = make_order(people.client_org)
        assert set(orders_for(people.alice)) == {mine}
        assert set(orders_for(people.charlie)) == {theirs}
        assert set(orders_for(people.rita)) == {client}
        assert set(orders_for(people.sam)) == {mine, theirs, client}
