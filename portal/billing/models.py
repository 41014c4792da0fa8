"""The usage ledger: what each node of an order, and its bucket, was used for, at which rate.

Rows are written by ``portal.billing.services`` in the transaction of the move that causes them
(hand-over, termination, a node failing or coming back, a price change, a bucket deleted).
Charges are computed from them by ``portal.catalog.pricing.metered_charges``."""

from django.db import models
from django.db.models import Q


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
