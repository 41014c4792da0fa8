"""What the API itself keeps: the first response to each `Idempotency-Key`."""

from django.db import models
from django.utils import timezone


class IdempotencyKey(models.Model):
    """The first successful response to a create call sent with an `Idempotency-Key`, replayed for
    24 hours to the same principal sending the same body. A row is written in the same transaction
    as what the call created: it exists only for calls that committed."""

    principal = models.CharField(max_length=64, help_text="`key:<prefix>` or `user:<id>`.")
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64, help_text="SHA-256 of method, path and body.")
    status_code = models.PositiveSmallIntegerField(null=True)
    response_body = models.JSONField(null=True)
    location = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["principal", "key"],
                                               name="one_response_per_idempotency_key")]

    def __str__(self) -> str:
        return f"{self.principal} {self.key}"
