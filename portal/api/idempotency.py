"""`Idempotency-Key` on create calls: the same key and body within 24 hours answer the first
response (status and body); the same key with another body is a 422.

The key's row is inserted in the same transaction as what the call creates, so a second request
with the same key waits on the unique index until the first commits, then replays its answer:
two concurrent identical requests create one object. A call that fails stores nothing (its
transaction rolls back), so it can be retried with the same key.

Answers are kept per organisation for API keys (any of the organisation's keys replays them) and
per person for a session, encrypted (they can carry a new API key or signing secret), and
deleted by a beat task once expired. A key that rotated itself is revoked, so its retry cannot
authenticate as usual: for SELF_ROTATION_REPLAY after the rotation, the old key may still
authenticate to replay that one answer (same path, same Idempotency-Key), and nothing else."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta
from functools import wraps

from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed, ValidationError
from rest_framework.response import Response

from portal.accounts.principals import ApiKeyPrincipal
from portal.accounts.services import api_key_verify
from portal.api.errors import Unprocessable
from portal.api.models import IdempotencyKey
from portal.core.retention import delete_in_batches

HEADER = "Idempotency-Key"
TTL = timedelta(hours=24)
SELF_ROTATION_REPLAY = timedelta(minutes=15)
MAX_KEY_LENGTH = 255
# Printable ASCII without surrounding spaces (what an HTTP header carries intact), e.g. a UUID.
KEY_PATTERN = r"^[!-~]([ -~]*[!-~])?$"


class ReplayOnlyPrincipal(ApiKeyPrincipal):
    """A revoked key retrying the rotation that revoked it: may replay that answer, nothing else."""

    replay_only = True


def replay_scope(user) -> str:
    if isinstance(user, ApiKeyPrincipal):
        return f"org:{user.organisation.pk}"
    return f"user:{user.pk}"


def request_hash(request) -> str:
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{request.method} {request.path}\n{body}".encode()).hexdigest()


def _header_key(request) -> str | None:
    key = request.headers.get(HEADER)
    if key is None:
        return None
    key = key.strip()
    if len(key) > MAX_KEY_LENGTH or not re.fullmatch(KEY_PATTERN, key):
        raise ValidationError({HEADER: [f"Give 1 to {MAX_KEY_LENGTH} printable ASCII characters, "
                                        f"e.g. a UUID."]})
    return key


def idempotent(method):
    """Decorates an APIView's `post`."""

    @wraps(method)
    def wrapper(view, request, *args, **kwargs):
        key = _header_key(request)
        if getattr(request.user, "replay_only", False):
            return _replay(replay_scope(request.user), key, request_hash(request))
        if key is None:
            return method(view, request, *args, **kwargs)
        scope, digest = replay_scope(request.user), request_hash(request)
        with transaction.atomic():
            IdempotencyKey.objects.filter(scope=scope, key=key,
                                          created_at__lt=timezone.now() - TTL).delete()
            try:
                with transaction.atomic():
                    record = IdempotencyKey.objects.create(
                        scope=scope, key=key, method=request.method, path=request.path[:255],
                        request_hash=digest, api_key=getattr(request.user, "api_key", None))
            except IntegrityError:  # the first request committed while this one waited
                return _replay(scope, key, digest)
            response = method(view, request, *args, **kwargs)
            if not 200 <= response.status_code < 300:
                transaction.set_rollback(True)  # nothing to remember: a retry runs afresh
                return response
            record.status_code = response.status_code
            record.response = json.dumps(response.data, default=str)
            record.location = response.get("Location", "")[:255]
            record.save(update_fields=["status_code", "response", "location"])
        return response

    return wrapper


def _replay(scope: str, key: str, digest: str) -> Response:
    record = (IdempotencyKey.objects.select_for_update()
              .filter(scope=scope, key=key, created_at__gte=timezone.now() - TTL).first())
    if record is None:  # only a replay-only principal gets here without a row
        raise AuthenticationFailed("Invalid or revoked API key.")
    if record.request_hash != digest:
        raise Unprocessable(f"{HEADER} {key!r} was used with another request body or path; "
                            f"use a new key for a new request.", code="idempotency_key_reused")
    headers = {"Idempotent-Replayed": "true"}
    if record.location:
        headers["Location"] = record.location
    return Response(json.loads(record.response), status=record.status_code, headers=headers)


def self_rotation_replay(request, plaintext: str) -> ReplayOnlyPrincipal | None:
    """The principal for a revoked key retrying, within SELF_ROTATION_REPLAY, the rotation of
    itself it made with this request's Idempotency-Key; None otherwise."""
    key_header = request.headers.get(HEADER, "").strip()
    api_key = api_key_verify(plaintext) if key_header else None
    if api_key is None or api_key.revoked_at is None:
        return None
    own_rotation = f"/api/v1/api-keys/{api_key.prefix}/rotate"
    since = timezone.now() - SELF_ROTATION_REPLAY
    if request.method != "POST" or request.path != own_rotation or api_key.revoked_at < since:
        return None
    made_it = IdempotencyKey.objects.filter(
        scope=f"org:{api_key.organisation_id}", key=key_header, api_key=api_key, path=own_rotation,
        created_at__gte=since).exists()
    return ReplayOnlyPrincipal(api_key) if made_it else None


def idempotency_keys_purge(*, now=None) -> int:
    """Deletes answers older than TTL (beat task), in the retention's short batches; returns how
    many."""
    old = IdempotencyKey.objects.filter(created_at__lt=(now or timezone.now()) - TTL)
    return sum(delete_in_batches(old).values())
