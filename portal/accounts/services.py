import hashlib
import hmac
import secrets
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from portal.accounts.models import ApiKey, Organisation

KEY_PREFIX_LENGTH = 8


def _hash(secret: str) -> str:
    # The secret has 256 bits of entropy, so a fast hash is enough; no stretching needed.
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedApiKey:
    api_key: ApiKey
    plaintext: str  # shown once, never stored


def api_key_issue(*, organisation: Organisation, name: str, by=None) -> IssuedApiKey:
    if not name.strip():
        raise ValueError("An API key needs a name, e.g. 'billing integration'.")
    prefix = secrets.token_hex(KEY_PREFIX_LENGTH // 2)
    secret = secrets.token_urlsafe(32)
    plaintext = f"ty_{prefix}_{secret}"
    key = ApiKey.objects.create(
        organisation=organisation, name=name.strip(), prefix=prefix,
        hashed_secret=_hash(plaintext), created_by=by,
    )
    return IssuedApiKey(api_key=key, plaintext=plaintext)


def api_key_authenticate(plaintext: str) -> ApiKey | None:
    parts = plaintext.split("_", 2)
    if len(parts) != 3 or parts[0] != "ty":
        return None
    key = ApiKey.objects.select_related("organisation").filter(prefix=parts[1]).first()
    if key is None or not key.is_active:
        return None
    if not hmac.compare_digest(key.hashed_secret, _hash(plaintext)):
        return None
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
    return key


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    api_key.refresh_from_db()
    return api_key
