import secrets
from datetime import timedelta

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F
from django.utils import timezone

from portal.core.crypto import EncryptedTextField
from portal.quotes.configuration import orders_a_bucket, prices_a_bucket
from portal.quotes.rules import MAX_RETENTION_DAYS, MIN_RETENTION_DAYS

QUOTE_VALID_DAYS = 14


def _quote_reference() -> str:
    return "Q-" + secrets.token_hex(4).upper()


def _default_valid_until():
    return timezone.now() + timedelta(days=QUOTE_VALID_DAYS)


def default_retention_days() -> int:
    """Days a terminated order's bucket is kept (settings.STORAGE_RETENTION_DAYS)."""
    return settings.STORAGE_RETENTION_DAYS


RETENTION_VALIDATORS = [MinValueValidator(MIN_RETENTION_DAYS), MaxValueValidator(MAX_RETENTION_DAYS)]


class StorageChoice(models.Model):
    """The object-storage part of a quote and of the order placed from it. For the "custom"
    provider kind the customer's own endpoint, bucket and keys (keys encrypted at rest)."""

    storage_retention_days = models.PositiveSmallIntegerField(
        default=default_retention_days, validators=RETENTION_VALIDATORS,
        help_text="Days the bucket is kept after termination, then deleted.")
    storage_endpoint_url = models.URLField(blank=True, help_text="Custom S3 endpoint only.")
    storage_bucket = models.CharField(max_length=63, blank=True, help_text="Custom S3 bucket only.")
    storage_access_key_id = EncryptedTextField(blank=True, default="")
    storage_secret_key = EncryptedTextField(blank=True, default="")

    class Meta:
        abstract = True

    @property
    def _storage_kind(self) -> str:
        return self.storage_provider.kind if self.storage_provider_id is not None else ""

    @property
    def has_object_storage(self) -> bool:
        """A bucket was ordered (quotes.configuration.orders_a_bucket)."""
        return orders_a_bucket(self._storage_kind, self.storage_tb)

    @property
    def has_priced_storage(self) -> bool:
        """The frozen price has a storage line (quotes.configuration.prices_a_bucket)."""
        return prices_a_bucket(self.storage_provider_id, self.storage_tb)

    @property
    def is_custom_storage(self) -> bool:
        return self.storage_provider is not None and self.storage_provider.kind == "custom"


class Quote(StorageChoice):
    """A priced configuration, frozen at the time it was made: an order is placed from it."""

    reference = models.CharField(max_length=12, unique=True, default=_quote_reference,
                                 editable=False)
    organisation = models.ForeignKey("accounts.Organisation", on_delete=models.CASCADE,
                                     related_name="quotes")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL)
    sku = models.ForeignKey("catalog.ServerSKU", on_delete=models.PROTECT)
    node_count = models.PositiveSmallIntegerField(default=1)
    nvme = models.ForeignKey("catalog.NvmeOption", on_delete=models.PROTECT)
    network = models.ForeignKey("catalog.NetworkOption", on_delete=models.PROTECT)
    storage_provider = models.ForeignKey("catalog.StorageProvider", null=True, blank=True,
                                         on_delete=models.PROTECT)
    storage_tb = models.PositiveIntegerField(default=0)
    strategy = models.ForeignKey("catalog.StackOption", null=True, blank=True,
                                 on_delete=models.PROTECT, related_name="+")
    tracker = models.ForeignKey("catalog.StackOption", null=True, blank=True,
                                on_delete=models.PROTECT, related_name="+")
    plan = models.JSONField(default=dict, blank=True,
                            help_text="Sizing plan snapshot the configuration came from.")
    price_lines = models.JSONField(default=list, blank=True,
                                   help_text="[{label, hourly, monthly}] at quote time.")
    price_hourly = models.DecimalField(max_digits=10, decimal_places=2)
    price_monthly = models.DecimalField(max_digits=12, decimal_places=2)
    currency = models.CharField(max_length=3, default="USD")
    valid_until = models.DateTimeField(default=_default_valid_until)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta(StorageChoice.Meta):
        abstract = False
        db_table = "orders_quote"  # the table it had before quotes left the orders app (data kept)
        ordering = ["-created_at"]
        # An organisation's quotes newest first (the home page's open quotes, the quote list).
        indexes = [models.Index("organisation", F("created_at").desc(), F("id").desc(),
                                name="quote_org_newest")]

    def __str__(self) -> str:
        return f"{self.reference} ({self.sku})"

    @property
    def is_valid(self) -> bool:
        return timezone.now() < self.valid_until
