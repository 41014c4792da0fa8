"""`Idempotency-Key` on create calls: the same key and body within 24 hours answer the first
response (status and body); the same key with another body is a 422.

The key's row is inserted in the same transaction as what the call creates, so a second request
with the same key waits on the unique index until the first commits, then replays its answer:
two concurrent identical requests create one object. A call that fails stores nothing (its
transaction rolls back), so it can be retried with the same key."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta
from functools import wraps

from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from portal.accounts.principals import ApiKeyPrincipal
from portal.api.errors import Unprocessable
from portal.api.models import IdempotencyKey

HEADER = "Idempotency-Key"
TTL = timedelta(hours=24)
MAX_KEY_LENGTH = 255
# Printable ASCII without surrounding spaces (what an HTTP header carries intact), e.g. a UUID.
KEY_PATTERN = r"^[!-~]([ -~]*[!-~])?$"


def principal_id(user) -> str:
    if isinstance(user, ApiKeyPrincipal):
        return f"key:{user.api_key.prefix}"
    return f"user:{user.pk}"


def request_hash(request) -> str:
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{request.method} {request.path}\n{body}".encode()).hexdigest()


def idempotent(method):
    """Decorates an APIView's `post`."""

    @wraps(method)
    def wrapper(view, request, *args, **kwargs):
        key = request.headers.get(HEADER)
        if key is None:
            return method(view, request, *args, **kwargs)
        key = key.strip()
        if len(key) > MAX_KEY_LENGTH or not re.fullmatch(KEY_PATTERN, key):
            raise ValidationError({HEADER: [f"Give 1 to {MAX_KEY_LENGTH} printable ASCII characters, "
                                            f"e.g. a UUID."]})
        principal, digest = principal_id(request.user), request_hash(request)
        with transaction.atomic():
            IdempotencyKey.objects.filter(principal=principal, key=key,
                                          created_at__lt=timezone.now() - TTL).delete()
            try:
                with transaction.atomic():
                    record = IdempotencyKey.objects.create(
                        principal=principal, key=key, method=request.method, path=request.path[:255],
                        request_hash=digest)
            except IntegrityError:  # the first request committed while this one waited
                return _replay(principal, key, digest)
            response = method(view, request, *args, **kwargs)
            if not 200 <= response.status_code < 300:
                transaction.set_rollback(True)  # nothing to remember: a retry runs afresh
                return response
            record.status_code = response.status_code
            record.response_body = json.loads(json.dumps(response.data, default=str))
            record.location = response.get("Location", "")[:255]
            record.save(update_fields=["status_code", "response_body", "location"])
        return response

    return wrapper


def _replay(principal: str, key: str, digest: str) -> Response:
    record = IdempotencyKey.objects.select_for_update().get(principal=principal, key=key)
    if record.request_hash != digest:
        raise Unprocessable(f"{HEADER} {key!r} was used with another request body or path; "
                            f"use a new key for a new request.", code="idempotency_key_reused")
    headers = {"Idempotent-Replayed": "true"}
    if record.location:
        headers["Location"] = record.location
    return Response(record.response_body, status=record.status_code, headers=headers)
