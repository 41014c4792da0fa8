"""Two-factor sign-in: an authenticator app (TOTP, django-otp) and ten one-time recovery codes.

Who must have it: hosting staff (a staff role, Django's ``is_staff`` or a superuser) always;
members of an organisation whose admin requires it; anyone else may turn it on. Sign-in is the
password first (Django's login view, throttled by axes), then a token on the verify page; until
then ``portal.accounts.middleware.TwoFactorMiddleware`` lets the session reach nothing else.

Recovery codes are stored as keyed hashes in django-otp's static-token table (shown once, like
API keys); the stock device verifies the hash of what the person types and deletes the token it
matched, so each code works once. A wrong token makes the device wait 1, 2, 4… seconds before
it checks the next one (django-otp's throttling, per device).
"""

from __future__ import annotations

import base64
import logging
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

import qrcode
import qrcode.image.svg
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils.crypto import salted_hmac
from django_otp import verify_token
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from portal.accounts import tasks
from portal.accounts.models import Membership, Organisation, User
from portal.accounts.team import can_manage_members

logger = logging.getLogger(__name__)

APP_DEVICE_NAME = "Authenticator app"
RECOVERY_DEVICE_NAME = "Recovery codes"
# No 0/o, 1/l/i: a code read off paper is typed right the first time.
_CODE_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
_CODE_LENGTH = 10  # ~49.5 bits each, two groups of five
_SEPARATORS = re.compile(r"[\s\-]+")


class Event:
    """What the person is told by e-mail (``tasks.security_notice_task``)."""

    ENABLED = "enabled"
    DISABLED = "disabled"
    CODES_REGENERATED = "codes_regenerated"
    RECOVERY_CODE_USED = "recovery_code_used"
    RESET_BY_STAFF = "reset_by_staff"


# --- who must have it ---------------------------------------------------------------------------
def is_staff_account(user) -> bool:
    return bool(user.is_superuser or user.is_staff or user.staff_role)


def organisations_requiring(user) -> list[Organisation]:
    return list(Organisation.objects.filter(memberships__user=user, require_two_factor=True)
                .order_by("name"))


def required_reason(user) -> str:
    """Why ``user`` may not go without a second factor; "" when it is their choice."""
    if is_staff_account(user):
        return "Staff accounts always sign in with a second factor."
    names = [org.name for org in organisations_requiring(user)]
    if names:
        return f"{' and '.join(names)} require{'s' if len(names) == 1 else ''} it of every member."
    return ""


class LoginStep:
    DONE = ""  # nothing to do: verified, or no second factor needed
    VERIFY = "verify"  # has an app: type its token
    ENROL = "enrol"  # must have one and has none yet


def login_step(user) -> str:
    """What a signed-in session that has not passed a second factor must do next (one query)."""
    row = (User.objects.filter(pk=user.pk).annotate(
        has_app=Exists(TOTPDevice.objects.filter(user=OuterRef("pk"), confirmed=True)),
        org_requires=Exists(Membership.objects.filter(user=OuterRef("pk"),
                                                      organisation__require_two_factor=True)),
    ).values("has_app", "org_requires").first())
    if row is None:
        return LoginStep.DONE
    if row["has_app"]:
        return LoginStep.VERIFY
    return LoginStep.ENROL if is_staff_account(user) or row["org_requires"] else LoginStep.DONE


def confirmed_app(user) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=True).order_by("pk").first()


@dataclass(frozen=True)
class TwoFactorStatus:
    enabled: bool
    required: str  # required_reason(); "" when optional
    since: datetime | None
    last_used_at: datetime | None
    recovery_codes_left: int


def status_of(user) -> TwoFactorStatus:
    app = confirmed_app(user)
    return TwoFactorStatus(enabled=app is not None, required=required_reason(user),
                           since=app.created_at if app else None,
                           last_used_at=app.last_used_at if app else None,
                           recovery_codes_left=recovery_codes_left(user))


# --- enrolment ----------------------------------------------------------------------------------
def enrolment_device(user) -> TOTPDevice:
    """The unconfirmed app device being set up: the same one (the same QR code) until confirmed."""
    device = TOTPDevice.objects.filter(user=user, confirmed=False).order_by("pk").first()
    return device or TOTPDevice.objects.create(user=user, name=APP_DEVICE_NAME, confirmed=False)


def manual_key(device: TOTPDevice) -> str:
    """The secret as authenticator apps take it when typed: base32, in groups of four."""
    key = base64.b32encode(device.bin_key).decode().rstrip("=")
    return " ".join(key[i:i + 4] for i in range(0, len(key), 4))


def qr_svg(device: TOTPDevice) -> str:
    """The otpauth:// link as an inline SVG QR code (no image request, no third party)."""
    image = qrcode.make(device.config_url, image_factory=qrcode.image.svg.SvgPathImage,
                        box_size=10, border=2)
    svg = image.to_string(encoding="unicode")
    svg = re.sub(r'\s(width|height)="[^"]*"', "", svg, count=2)  # sized by CSS
    return svg.replace("<svg ", '<svg class="qr" role="img" aria-label="QR code to scan with '
                                'your authenticator app" ', 1)


@transaction.atomic
def enrolment_confirm(*, user, device: TOTPDevice, token: str) -> list[str]:
    """Confirms the app with a token it shows; returns the new recovery codes (shown once)."""
    device = TOTPDevice.objects.select_for_update().get(pk=device.pk, user=user, confirmed=False)
    if not device.verify_token(_digits(token)):
        raise ValidationError({"token": "That code does not match. Type the 6 digits the app shows "
                                        "now; if it keeps failing, check that the phone's clock is "
                                        "set automatically."})
    TOTPDevice.objects.filter(user=user).exclude(pk=device.pk).delete()  # one app per person
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    codes = _recovery_codes_issue(user)
    _notify(user, Event.ENABLED)
    logger.info("two-factor enabled", extra={"user_id": user.pk})
    return codes


# --- sign-in ------------------------------------------------------------------------------------
class TokenRefused(Exception):
    """The token did not verify; ``str()`` says what the person can do."""


def verify(*, user, token: str) -> TOTPDevice | StaticDevice:
    """The device that accepted ``token`` (6 digits from the app, or a recovery code);
    ``TokenRefused`` otherwise. Pass the device to ``django_otp.login``."""
    digits = _digits(token)
    if re.fullmatch(r"\d{6}", digits):
        device = confirmed_app(user)
        if device is None:
            raise TokenRefused("Two-factor sign-in is not set up for this account.")
        return _checked(user, device, digits)
    code = normalise_code(token)
    device = StaticDevice.objects.filter(user=user, confirmed=True).first()
    if device is None or len(code) != _CODE_LENGTH:
        raise TokenRefused("Type the 6-digit code from your authenticator app, or one of your "
                           "recovery codes (ten letters and digits).")
    verified = _checked(user, device, code_hash(code))
    _notify(user, Event.RECOVERY_CODE_USED)
    return verified


def _checked(user, device, token: str):
    allowed, _ = device.verify_is_allowed()
    if not allowed:
        raise TokenRefused("Too many wrong codes in a row: wait a few seconds, then try again.")
    verified = verify_token(user, device.persistent_id, token)
    if verified is None:
        logger.warning("two-factor token refused", extra={"user_id": user.pk})
        raise TokenRefused("That code is not right, or was used already. Check the app for the "
                           "current code (they change every 30 seconds).")
    return verified


def _digits(token: str) -> str:
    return _SEPARATORS.sub("", token or "")


# --- recovery codes -----------------------------------------------------------------------------
def normalise_code(code: str) -> str:
    return _SEPARATORS.sub("", code or "").lower()


def code_hash(code: str) -> str:
    """What is stored of a recovery code: a keyed hash, cut to the token column's 16 characters."""
    digest = salted_hmac("trainyard.two_factor.recovery_code", normalise_code(code),
                         secret=settings.SECRET_KEY, algorithm="sha256").hexdigest()
    return digest[:16]


def _new_code() -> str:
    raw = "".join(secrets.choice(_CODE_ALPHABET) for _ in range(_CODE_LENGTH))
    return f"{raw[:5]}-{raw[5:]}"


def _recovery_codes_issue(user) -> list[str]:
    device, _ = StaticDevice.objects.get_or_create(user=user, name=RECOVERY_DEVICE_NAME,
                                                   defaults={"confirmed": True})
    device.token_set.all().delete()
    codes = [_new_code() for _ in range(settings.TWO_FACTOR_RECOVERY_CODES)]
    StaticToken.objects.bulk_create([StaticToken(device=device, token=code_hash(c)) for c in codes])
    return codes


def recovery_codes_left(user) -> int:
    return StaticToken.objects.filter(device__user=user, device__confirmed=True).count()


@transaction.atomic
def recovery_codes_regenerate(*, user) -> list[str]:
    """New codes for a person with two-factor on; the old ones stop working."""
    if confirmed_app(user) is None:
        raise PermissionDenied("Turn two-factor sign-in on first.")
    codes = _recovery_codes_issue(user)
    _notify(user, Event.CODES_REGENERATED)
    return codes


# --- turning it off -----------------------------------------------------------------------------
@transaction.atomic
def two_factor_disable(*, user, token: str) -> None:
    """Turns it off for a person who may go without, after a current token (or recovery code)."""
    reason = required_reason(user)
    if reason:
        raise PermissionDenied(f"Two-factor sign-in stays on: {reason}")
    try:
        verify(user=user, token=token)
    except TokenRefused as exc:
        raise ValidationError({"token": str(exc)}) from exc
    _devices_delete(user)
    _notify(user, Event.DISABLED)
    logger.info("two-factor disabled", extra={"user_id": user.pk})


@transaction.atomic
def two_factor_reset(*, user, by: str) -> int:
    """Support: removes a person's app and codes (a lost phone). Their next sign-in sets up a new
    app when they must have one. ``by`` names who did it, for the log. Returns devices removed."""
    removed = _devices_delete(user)
    if removed:  # nothing to tell when there was nothing to remove
        _notify(user, Event.RESET_BY_STAFF)
        logger.warning("two-factor reset", extra={"user_id": user.pk, "by": by, "devices": removed})
    return removed


def _devices_delete(user) -> int:
    apps, _ = TOTPDevice.objects.filter(user=user).delete()
    codes, _ = StaticDevice.objects.filter(user=user).delete()
    return apps + codes


# --- an organisation's requirement --------------------------------------------------------------
@transaction.atomic
def organisation_require_set(*, organisation: Organisation, required: bool, by) -> Organisation:
    """Whoever manages its members (``team.can_manage_members``) requires a second factor of
    them, or stops. Requiring it takes someone who has it: nobody locks a team out with a rule
    they don't meet themselves."""
    if not can_manage_members(by, organisation):
        raise PermissionDenied("Only an admin of this organisation can change this.")
    if required and confirmed_app(by) is None:
        raise ValidationError("Turn on two-factor sign-in for your own account first (Your "
                              "account → Two-factor sign-in), then require it of the team.")
    organisation.require_two_factor = required
    organisation.save(update_fields=["require_two_factor"])
    return organisation


def members_without(organisation: Organisation) -> set[int]:
    """User ids of ``organisation``'s members who have no authenticator app yet."""
    with_app = TOTPDevice.objects.filter(confirmed=True).values("user_id")
    return set(organisation.memberships.exclude(user_id__in=with_app).values_list("user_id", flat=True))


def _notify(user, event: str) -> None:
    transaction.on_commit(lambda: tasks.queue(tasks.security_notice_task, user.pk, event))
