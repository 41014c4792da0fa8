"""Buckets and the keys that reach them. Imported by provisioning.models so Django sees them.
State changes only through provisioning.storage.services."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from portal.core.crypto import EncryptedTextField
from portal.core.models import TransitionEvent
from provisioning.storage.states import BucketState


class Bucket(models.Model):
    order = models.ForeignKey("orders.Order", on_delete=models.PROTECT, related_name="buckets")
    provider = models.ForeignKey("catalog.StorageProvider", on_delete=models.PROTECT,
                                 related_name="buckets")
    name = models.CharField(max_length=63)
    managed = models.BooleanField(default=True,
                                  help_text="False: the customer's own bucket (we never delete it).")
    region = models.CharField(max_length=40, blank=True)
    endpoint = models.CharField(max_length=255, blank=True, help_text="What the customer uses.")
    state = models.CharField(max_length=10, choices=BucketState.choices, default=BucketState.ACTIVE,
                             db_index=True)
    state_changed_at = models.DateTimeField(auto_now_add=True)
    retain_until = models.DateTimeField(null=True, blank=True, db_index=True)
    settings_skipped = models.JSONField(default=list, blank=True,
                                        help_text="Settings the provider does not offer.")
    # A read-only key the customer asked for during retention, being issued by a worker.
    read_key_requested_at = models.DateTimeField(null=True, blank=True)
    read_key_error = models.TextField(blank=True, help_text="Why the last read-only key could "
                                                            "not be issued (for staff).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["order"], name="one_bucket_per_order"),
            models.UniqueConstraint(fields=["name"], condition=Q(managed=True),
                                    name="managed_bucket_name_unique"),
        ]

    def __str__(self) -> str:
        return self.name


class BucketEvent(TransitionEvent):
    bucket = models.ForeignKey(Bucket, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=10, choices=BucketState.choices)
    to_state = models.CharField(max_length=10, choices=BucketState.choices)

    def __str__(self) -> str:
        return f"{self.bucket}: {self.from_state} → {self.to_state}"


class Credential(models.Model):
    """A key scoped to one bucket. The secret is encrypted at rest and shown once. The nodes'
    key reads and writes; a ``read_only`` key (lists and reads) is what a customer gets for a
    terminated order's retained bucket."""

    bucket = models.ForeignKey(Bucket, on_delete=models.CASCADE, related_name="credentials")
    access_key_id = models.CharField(max_length=128)
    secret = EncryptedTextField(blank=True)
    handle = models.CharField(max_length=128, blank=True,
                              help_text="What the provider needs to revoke it (IAM user, key id).")
    active = models.BooleanField(default=True)
    read_only = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    revealed_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["bucket"], condition=Q(active=True, read_only=False),
                                    name="one_active_credential_per_bucket"),
            models.UniqueConstraint(fields=["bucket"], condition=Q(active=True, read_only=True),
                                    name="one_active_read_only_credential_per_bucket"),
        ]

    def __str__(self) -> str:
        return f"{self.access_key_id} ({'active' if self.active else 'inactive'})"
