"""What the API itself keeps: the first response to each `Idempotency-Key`."""

from django.db import models
from django.utils import timezone

from portal.core.crypto import EncryptedTextField


class IdempotencyKey(models.Model):
    """The first successful response to a create call sent with an `Idempotency-Key`, replayed for
    24 hours to the same scope sending the same body. A row is written in the same transaction
    as what the call created: it exists only for calls that committed.

    The scope is the organisation for API keys (any of its keys replays, so a key that rotated
    itself can be retried with the new one) and the person for a session. The body is encrypted:
    it may carry a new API key or a webhook signing secret. A beat task deletes expired rows."""

    scope = models.CharField(max_length=64, help_text="`org:<id>` (API keys) or `user:<id>` (a session).")
    key = models.CharField(max_length=255)
    api_key = models.ForeignKey("accounts.ApiKey", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+", help_text="The key that made the first call.")
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64, help_text="SHA-256 of method, path and body.")
    status_code = models.PositiveSmallIntegerField(null=True)
    response = EncryptedTextField(blank=True, default="", help_text="The JSON body, encrypted.")
    location = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope", "key"],
                                               name="one_response_per_idempotency_scope_and_key")]

    def __str__(self) -> str:
        return f"{self.scope} {self.key}"
