import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import slugify

from portal.accounts.models import ApiKey, Organisation, SSHKey
from portal.accounts.ssh_keys import InvalidPublicKey, parse_public_key
from portal.core.taken import Taken

KEY_PREFIX_LENGTH = 8
SCOPES = tuple(ApiKey.Scope.values)
# `last_used_at` is written at most this often per key: most requests write nothing.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _hash(secret: str) -> str:
    # The secret has 256 bits of entropy, so a fast hash is enough; no stretching needed.
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedApiKey:
    api_key: ApiKey
    plaintext: str  # shown once, never stored


def api_key_issue(*, organisation: Organisation, name: str, by=None,
                  scopes: tuple[str, ...] | list[str] = SCOPES) -> IssuedApiKey:
    if not name.strip():
        raise ValueError("An API key needs a name, e.g. 'billing integration'.")
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown:
        raise ValueError(f"Unknown scope {', '.join(unknown)}: use {' and/or '.join(SCOPES)}.")
    if not scopes:
        raise ValueError("An API key needs at least one scope (read).")
    scopes = [s for s in SCOPES if s in scopes]
    if "write" in scopes and "read" not in scopes:
        raise ValueError("A key that writes also reads: add the read scope.")
    prefix = secrets.token_hex(KEY_PREFIX_LENGTH // 2)
    secret = secrets.token_urlsafe(32)
    plaintext = f"ty_{prefix}_{secret}"
    key = ApiKey.objects.create(
        organisation=organisation, name=name.strip(), prefix=prefix,
        hashed_secret=_hash(plaintext), created_by=by if getattr(by, "pk", None) else None,
        scopes=scopes,
    )
    return IssuedApiKey(api_key=key, plaintext=plaintext)


def api_key_verify(plaintext: str) -> ApiKey | None:
    """The key whose secret ``plaintext`` is, active or revoked; None for anything else."""
    parts = plaintext.split("_", 2)
    if len(parts) != 3 or parts[0] != "ty":
        return None
    key = ApiKey.objects.select_related("organisation").filter(prefix=parts[1]).first()
    if key is None or not hmac.compare_digest(key.hashed_secret, _hash(plaintext)):
        return None
    return key


def api_key_authenticate(plaintext: str) -> ApiKey | None:
    key = api_key_verify(plaintext)
    if key is None or not key.is_active:
        return None
    api_key_touch(key)
    return key


def api_key_touch(key: ApiKey) -> None:
    """Records use at most once a minute: a read within the minute writes nothing, and of two
    concurrent requests only one UPDATE matches (the conditional WHERE)."""
    now = timezone.now()
    if key.last_used_at is not None and now - key.last_used_at < LAST_USED_RESOLUTION:
        return
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    ApiKey.objects.filter(stale, pk=key.pk).update(last_used_at=now)
    key.last_used_at = now


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    api_key.refresh_from_db()
    return api_key


@transaction.atomic
def api_key_rotate(*, api_key: ApiKey, by=None) -> IssuedApiKey:
    """A new key with the same organisation, name and scopes; the old one is revoked at once."""
    locked = ApiKey.objects.select_for_update().get(pk=api_key.pk)
    if not locked.is_active:
        raise ValueError(f"Key {locked.prefix} is revoked; issue a new key instead.")
    issued = api_key_issue(organisation=locked.organisation, name=locked.name, by=by,
                           scopes=locked.scopes)
    api_key_revoke(api_key=locked)
    return issued


# --- a reseller's customers -----------------------------------------------------------------
def _require_reseller(reseller: Organisation) -> None:
    if reseller.kind != Organisation.Kind.RESELLER:
        raise PermissionDenied("Only a reseller organisation has customers.")


@transaction.atomic
def customer_create(*, reseller: Organisation, name: str, slug: str = "") -> Organisation:
    """A customer organisation sold by ``reseller``; ValidationError (by field) on a bad name or
    slug, PermissionDenied when ``reseller`` is not one."""
    _require_reseller(reseller)
    name = name.strip()
    if not name:
        raise ValidationError({"name": "A customer needs a name."})
    slug = slugify(slug or name)[:50]
    if not slug:
        raise ValidationError({"slug": "Give a slug of letters, digits and hyphens."})
    if Organisation.objects.filter(slug=slug).exists():
        raise Taken({"slug": f"The slug {slug!r} is taken; choose another."})
    return Organisation.objects.create(name=name, slug=slug, kind=Organisation.Kind.CUSTOMER,
                                       parent=reseller)


@transaction.atomic
def customer_update(*, customer: Organisation, name: str) -> Organisation:
    name = name.strip()
    if not name:
        raise ValidationError({"name": "A customer needs a name."})
    customer.name = name
    customer.save(update_fields=["name"])
    return customer


# --- SSH public keys ------------------------------------------------------------------------
SSH_KEY_NAME_MAX = SSHKey._meta.get_field("name").max_length


def ssh_key_add(*, public_key: str, name: str = "", user=None,
                organisation: Organisation | None = None, by=None) -> SSHKey:
    """Adds a public key for ``user`` (their own) or ``organisation`` (exactly one of them).
    ValidationError by field (``public_key``, ``name``) on anything that is not one good key,
    or on a key this owner already has; nothing is stored then. Installing the key on running
    servers is ``provisioning.fulfilment.ssh_keys``'s part."""
    if (user is None) == (organisation is None):
        raise ValueError("An SSH key belongs to a user or to an organisation, not both or neither.")
    try:
        parsed = parse_public_key(public_key)
    except InvalidPublicKey as exc:
        raise ValidationError({"public_key": str(exc)}) from None
    name = " ".join((name or parsed.comment or f"{parsed.label} key").split())[:SSH_KEY_NAME_MAX]
    owner = {"user": user} if user is not None else {"organisation": organisation}
    existing = SSHKey.objects.filter(**owner, fingerprint=parsed.fingerprint).first()
    if existing is not None:
        raise Taken({"public_key": _duplicate(existing)})
    try:
        with transaction.atomic():
            return SSHKey.objects.create(
                **owner, name=name, public_key=parsed.line, key_type=parsed.key_type,
                bits=parsed.bits, fingerprint=parsed.fingerprint,
                created_by=by if getattr(by, "pk", None) else None)
    except IntegrityError:  # the same key added twice at once: the first one won
        existing = SSHKey.objects.filter(**owner, fingerprint=parsed.fingerprint).first()
        if existing is None:
            raise
        raise Taken({"public_key": _duplicate(existing)}) from None


def _duplicate(existing: SSHKey) -> str:
    return (f"This key is already added as “{existing.name}” ({existing.fingerprint}), on "
            f"{existing.created_at:%d %b %Y}.")


def ssh_key_remove(*, ssh_key: SSHKey) -> None:
    """Removes the key; servers drop it at their next key sync (``provisioning.fulfilment.ssh_keys``)."""
    SSHKey.objects.filter(pk=ssh_key.pk).delete()
