import secrets

from django.conf import settings
from django.db import models
from django.db.models import F
from django.utils import timezone

from portal.core.models import TransitionEvent
from portal.orders.states import OrderState
from portal.quotes.models import StorageChoice


def _order_reference() -> str:
    return "O-" + secrets.token_hex(4).upper()


class Order(StorageChoice):
    """A customer's order for N identical nodes, placed from a quote. State changes only through
    ``portal.orders.transitions.order_transition`` (one table: ``portal.orders.states``)."""

    reference = models.CharField(max_length=12, unique=True, default=_order_reference,
                                 editable=False)
    organisation = models.ForeignKey("accounts.Organisation", on_delete=models.PROTECT,
                                     related_name="orders")
    placed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                  on_delete=models.SET_NULL, related_name="orders_placed")
    quote = models.ForeignKey("quotes.Quote", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="orders")
    # The configuration and prices, copied from the quote: they do not change with the catalog.
    sku = models.ForeignKey("catalog.ServerSKU", on_delete=models.PROTECT, related_name="orders")
    node_count = models.PositiveSmallIntegerField(default=1)
    nvme = models.ForeignKey("catalog.NvmeOption", on_delete=models.PROTECT, related_name="+")
    network = models.ForeignKey("catalog.NetworkOption", on_delete=models.PROTECT, related_name="+")
    storage_provider = models.ForeignKey("catalog.StorageProvider", null=True, blank=True,
                                         on_delete=models.PROTECT, related_name="+")
    storage_tb = models.PositiveIntegerField(default=0)
    strategy = models.ForeignKey("catalog.StackOption", null=True, blank=True,
                                 on_delete=models.PROTECT, related_name="+")
    tracker = models.ForeignKey("catalog.StackOption", null=True, blank=True,
                                on_delete=models.PROTECT, related_name="+")
    plan = models.JSONField(default=dict, blank=True)
    wipe_data_devices = models.BooleanField(
        default=False, help_text="Configure may erase the partitions, filesystems or arrays it "
                                 "finds on the nodes' data devices (otherwise it refuses them).")
    price_lines = models.JSONField(default=list, blank=True)
    price_hourly = models.DecimalField(max_digits=10, decimal_places=2)
    price_monthly = models.DecimalField(max_digits=12, decimal_places=2)
    currency = models.CharField(max_length=3, default="USD")

    state = models.CharField(max_length=20, choices=OrderState.choices, default=OrderState.DRAFT,
                             db_index=True)
    target_state = models.CharField(max_length=20, choices=OrderState.choices, blank=True,
                                    help_text="Where in-flight work is taking the order.")
    state_changed_at = models.DateTimeField(default=timezone.now)
    rejection_reason = models.TextField(blank=True, help_text="Shown to the customer.")
    failure_reason = models.TextField(blank=True, help_text="The failed step's message.")
    approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    approved_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta(StorageChoice.Meta):
        abstract = False
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=models.Q(node_count__gte=1), name="order_has_nodes"),
        ]
        # Lists are newest first: all orders (staff), one organisation's (its members), each
        # page read by an index range (keyset: portal.core.keyset).
        indexes = [
            models.Index(F("created_at").desc(), F("id").desc(), name="order_newest"),
            models.Index("organisation", F("created_at").desc(), F("id").desc(),
                         name="order_org_newest"),
        ]

    def __str__(self) -> str:
        return self.reference

    @property
    def is_cluster(self) -> bool:
        return self.node_count > 1

    @property
    def servers_label(self) -> str:
        """"8× H100 SXM5 80GB (NVSwitch)", or "2 × 8× H100 …" for a cluster: the SKU's name
        already counts its GPUs, so one node never reads "1× 8× …"."""
        return f"{self.node_count} × {self.sku.name}" if self.node_count > 1 else self.sku.name


class OrderEvent(TransitionEvent):
    """The audit trail: who moved the order from which state to which, when, and why."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="events")
    api_key = models.ForeignKey("accounts.ApiKey", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+", help_text="The key of the API call that acted.")
    from_state = models.CharField(max_length=20, choices=OrderState.choices)
    to_state = models.CharField(max_length=20, choices=OrderState.choices)
    notified_at = models.DateTimeField(
        null=True, blank=True, help_text="When the customer's e-mail for this event was sent (the "
                                         "task claims it first, so a redelivery sends nothing).")

    def __str__(self) -> str:
        return f"{self.order}: {self.from_state} → {self.to_state}"
