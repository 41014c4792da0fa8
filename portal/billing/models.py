"""The usage ledger: what each node of an order, and its bucket, was used for, at which rate.

Rows are written by ``portal.billing.services`` in the transaction of the move that causes them
(hand-over, termination, a node failing or coming back, a price change, a bucket deleted).
Charges are computed from them by ``portal.catalog.pricing.metered_charges``."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from portal.billing.tax import vat_id_problem
from portal.core.models import TransitionEvent


class UsageInterval(models.Model):
    class Kind(models.TextChoices):
        NODE = "node", "Server node"
        STORAGE = "storage", "Object storage"

    order = models.ForeignKey("orders.Order", on_delete=models.PROTECT, related_name="usage")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    # The node's id and name in inventory (fulfilment's table, above billing: no foreign key);
    # 0 for the bucket.
    meter = models.PositiveIntegerField(default=0)
    label = models.CharField(max_length=100)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    # The whole line's rates (all nodes of the order); a node bills 1/share of them.
    hourly = models.DecimalField(max_digits=12, decimal_places=2)
    monthly = models.DecimalField(max_digits=12, decimal_places=2)
    share = models.PositiveSmallIntegerField(default=1)
    # The meter's measured time before this interval (its earlier intervals, summed; written at
    # open): where its billing units stand, so a month is priced without reading the history.
    measured_before_us = models.BigIntegerField(default=0)
    opened_by = models.CharField(max_length=40, help_text="What opened it: hand-over, price change…")
    closed_by = models.CharField(max_length=40, blank=True)

    class Meta:
        ordering = ["order_id", "kind", "meter", "started_at"]
        constraints = [
            # One open interval per meter: a second hand-over of the same node never bills twice.
            models.UniqueConstraint(fields=["order", "kind", "meter"], condition=Q(ended_at=None),
                                    name="usage_one_open_per_meter"),
            models.CheckConstraint(condition=Q(ended_at=None) | Q(ended_at__gte=models.F("started_at")),
                                   name="usage_ends_after_start"),
            models.CheckConstraint(condition=Q(share__gte=1), name="usage_share_positive"),
        ]
        indexes = [models.Index(fields=["order", "started_at"], name="usage_order_start"),
                   models.Index(fields=["ended_at"], name="usage_ended")]

    def __str__(self) -> str:
        return f"{self.order_id} {self.label} {self.started_at:%Y-%m-%d %H:%M}–{self.ended_at or '…'}"


class BillingProfile(models.Model):
    """Who an organisation's invoices are made out to (copied onto each invoice at issue)."""

    organisation = models.OneToOneField("accounts.Organisation", on_delete=models.CASCADE,
                                        related_name="billing_profile")
    legal_name = models.CharField(max_length=200)
    address = models.TextField(help_text="Street, postcode and city, one per line.")
    country = models.CharField(max_length=2, help_text="ISO 3166 code, e.g. DE.")
    vat_id = models.CharField(max_length=20, blank=True, help_text="EU VAT id, e.g. DE123456789.")
    email = models.EmailField(blank=True, help_text="Where invoices go (default: the members).")

    def __str__(self) -> str:
        return self.legal_name

    def clean(self):
        self.country = self.country.upper()
        if self.vat_id and (problem := vat_id_problem(self.vat_id, self.country)):
            raise ValidationError({"vat_id": problem})


class BillingProfileEvent(TransitionEvent):
    """The audit trail of a billing profile: who changed which details, from what to what."""

    organisation = models.ForeignKey("accounts.Organisation", on_delete=models.CASCADE,
                                     related_name="billing_profile_events")


class InvoiceNumberCounter(models.Model):
    """The next number of one issuer's gapless sequence; locked (SELECT … FOR UPDATE) by the
    transaction that finalises a document, so two finalisations never share or skip a number."""

    issuer = models.CharField(max_length=40, unique=True)
    last_number = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.issuer}: {self.last_number}"


class FinalisedDocument(Exception):
    """An issued invoice or credit note does not change: correct it with a credit note."""


class InvoiceQuerySet(models.QuerySet):
    def update(self, **kwargs):
        if self.filter(state=Invoice.State.ISSUED).exists():
            raise FinalisedDocument("An issued invoice cannot be changed; issue a credit note.")
        return super().update(**kwargs)

    def delete(self):
        if self.filter(state=Invoice.State.ISSUED).exists():
            raise FinalisedDocument("An issued invoice cannot be deleted; issue a credit note.")
        return super().delete()


class Invoice(models.Model):
    """A monthly invoice of one organisation, or a credit note correcting an issued invoice.
    Drafts are reviewed by staff; finalising numbers it and copies the customer's and issuer's
    details; from then on nothing of it changes (model, queryset, admin and API refuse)."""

    class Kind(models.TextChoices):
        INVOICE = "invoice", "Invoice"
        CREDIT_NOTE = "credit_note", "Credit note"

    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        ISSUED = "issued", "Issued"

    organisation = models.ForeignKey("accounts.Organisation", on_delete=models.PROTECT,
                                     related_name="invoices")
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.INVOICE)
    period_start = models.DateField(help_text="The month billed (its first day, UTC).")
    credit_for = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="credit_notes")
    reason = models.TextField(blank=True, help_text="A credit note's reason, shown on it.")
    state = models.CharField(max_length=8, choices=State.choices, default=State.DRAFT)
    state_changed_at = models.DateTimeField(auto_now_add=True)
    issuer = models.CharField(max_length=40)
    number = models.CharField(max_length=40, null=True, blank=True, unique=True)
    issued_at = models.DateTimeField(null=True, blank=True)
    customer = models.JSONField(default=dict, blank=True, help_text="Copied at issue.")
    issuer_details = models.JSONField(default=dict, blank=True, help_text="Copied at issue.")
    currency = models.CharField(max_length=3, default="USD")
    subtotal = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    tax_rate = models.DecimalField(max_digits=5, decimal_places=2, default=0)
    tax = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    total = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    tax_note = models.TextField(blank=True, help_text="The wording the tax treatment requires.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = InvoiceQuerySet.as_manager()

    class Meta:
        ordering = ["-period_start", "-pk"]
        constraints = [
            # One invoice per organisation and month: a second close finds it.
            models.UniqueConstraint(fields=["organisation", "period_start"],
                                    condition=Q(kind="invoice"), name="invoice_one_per_month"),
            models.CheckConstraint(condition=Q(state="draft") | Q(number__isnull=False),
                                   name="invoice_issued_has_number"),
            models.CheckConstraint(condition=Q(kind="invoice") | Q(credit_for__isnull=False),
                                   name="credit_note_references_invoice"),
        ]

    def __str__(self) -> str:
        return self.number or f"draft {self.get_kind_display().lower()} #{self.pk}"

    def save(self, *args, **kwargs):
        if self._stored_state() == self.State.ISSUED:
            raise FinalisedDocument(f"{self} is issued and cannot be changed; issue a credit note.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self._stored_state() == self.State.ISSUED:
            raise FinalisedDocument(f"{self} is issued and cannot be deleted.")
        return super().delete(*args, **kwargs)

    def _stored_state(self) -> str | None:
        if self.pk is None:
            return None
        return type(self)._base_manager.filter(pk=self.pk).values_list("state", flat=True).first()

    @property
    def is_issued(self) -> bool:
        return self.state == self.State.ISSUED


class InvoiceLineQuerySet(models.QuerySet):
    def _refuse_issued(self):
        if self.filter(invoice__state=Invoice.State.ISSUED).exists():
            raise FinalisedDocument("The lines of an issued invoice cannot be changed.")

    def update(self, **kwargs):
        self._refuse_issued()
        return super().update(**kwargs)

    def delete(self):
        self._refuse_issued()
        return super().delete()

    def bulk_create(self, objs, *args, **kwargs):
        objs = list(objs)
        if Invoice._base_manager.filter(pk__in={o.invoice_id for o in objs},
                                        state=Invoice.State.ISSUED).exists():
            raise FinalisedDocument("An issued invoice gets no new lines.")
        return super().bulk_create(objs, *args, **kwargs)


class InvoiceLine(models.Model):
    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="lines")
    # What the line bills, unique per document: "<order id>:<node|storage>:<meter>" or "adj:<n>".
    key = models.CharField(max_length=60)
    order = models.ForeignKey("orders.Order", null=True, blank=True, on_delete=models.PROTECT,
                              related_name="+")
    description = models.CharField(max_length=300)
    quantity = models.DecimalField(max_digits=12, decimal_places=2, default=0,
                                   help_text="Billed hours (or 1 for an adjustment).")
    amount = models.DecimalField(max_digits=14, decimal_places=2)
    position = models.PositiveIntegerField(default=0)

    objects = InvoiceLineQuerySet.as_manager()

    class Meta:
        ordering = ["invoice_id", "position", "pk"]
        constraints = [models.UniqueConstraint(fields=["invoice", "key"], name="invoice_line_once")]

    def __str__(self) -> str:
        return self.description

    def save(self, *args, **kwargs):
        if self._invoice_issued():
            raise FinalisedDocument("The lines of an issued invoice cannot be changed.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self._invoice_issued():
            raise FinalisedDocument("The lines of an issued invoice cannot be changed.")
        return super().delete(*args, **kwargs)

    def _invoice_issued(self) -> bool:
        return Invoice._base_manager.filter(pk=self.invoice_id, state=Invoice.State.ISSUED).exists()


class InvoiceEvent(TransitionEvent):
    """The audit trail of a document: drafted, refreshed, finalised (who, when, note)."""

    invoice = models.ForeignKey(Invoice, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=8, choices=Invoice.State.choices)
    to_state = models.CharField(max_length=8, choices=Invoice.State.choices)


class SpendLimit(models.Model):
    """An organisation's monthly spend limit (USD, before tax): alerts at 50, 80 and 100 %, and
    from 100 % its new orders wait for staff approval (running servers keep running)."""

    organisation = models.OneToOneField("accounts.Organisation", on_delete=models.CASCADE,
                                        related_name="spend_limit")
    monthly_usd = models.DecimalField(max_digits=12, decimal_places=2)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(monthly_usd__gt=0),
                                              name="spend_limit_positive")]

    def __str__(self) -> str:
        return f"{self.organisation}: {self.monthly_usd} USD/month"


class SpendAlert(models.Model):
    """One threshold reached in one month: sent once (the unique key)."""

    organisation = models.ForeignKey("accounts.Organisation", on_delete=models.CASCADE,
                                     related_name="spend_alerts")
    month = models.DateField()
    threshold = models.PositiveSmallIntegerField()
    spent_usd = models.DecimalField(max_digits=14, decimal_places=2)
    limit_usd = models.DecimalField(max_digits=12, decimal_places=2)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organisation", "month", "threshold"],
                                               name="spend_alert_once")]

    def __str__(self) -> str:
        return f"{self.organisation} {self.month:%Y-%m} {self.threshold} %"


class TerminationDeadline(models.Model):
    """A customer's "terminate at": past it, fulfilment terminates the order as if the customer
    had asked (access revoked, checkpoints kept for the order's retention, disks wiped)."""

    order = models.OneToOneField("orders.Order", on_delete=models.CASCADE,
                                 related_name="termination_deadline")
    terminate_at = models.DateTimeField(db_index=True)
    set_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                               on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.order_id} at {self.terminate_at:%Y-%m-%d %H:%M}"
