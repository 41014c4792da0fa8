"""E-mails of the accounts app, each sent by a Celery task queued after the commit (ids in):
an invitation (sent once: the task claims ``Invitation.sent_at``), the link that verifies a new
account's e-mail, the link that confirms a changed e-mail, an e-mail to hosting staff by role
(queued by ``portal.accounts.staff_notifications``). Mail server blips (OSError) are
retried with backoff; the links are signed when the mail is written (``portal.accounts.tokens``),
so no secret passes through the broker."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from portal.accounts import tokens
from portal.accounts.models import Invitation, User
from portal.accounts.retention import login_logs_prune, sessions_clear_expired
from portal.core import mail
from portal.core.retention import RETENTION_TASK_OPTIONS

logger = logging.getLogger(__name__)
RETRY = {"acks_late": True, "autoretry_for": (OSError,), "max_retries": 5, "retry_backoff": True}


def queue(task, *args) -> None:
    """Queues ``task``; a broker outage is logged (the person can ask for the mail again)."""
    try:
        task.delay(*args)
    except Exception:
        logger.exception("could not queue %s", task.name)


def _link(name: str, token: str) -> str:
    return settings.SITE_URL.rstrip("/") + reverse(name, args=[token])


@shared_task(name="accounts.invitation_send", **RETRY)
def invitation_send_task(invitation_id: int) -> int:
    claimed = Invitation.objects.filter(pk=invitation_id, sent_at__isnull=True,
                                        accepted_at__isnull=True, revoked_at__isnull=True).update(
        sent_at=timezone.now())
    if not claimed:
        return 0  # sent already (a redelivery), accepted or withdrawn meanwhile
    invitation = Invitation.objects.select_related("organisation", "invited_by").get(pk=invitation_id)
    inviter, reseller = invitation.invited_by, invitation.organisation.parent
    who = ((inviter.get_full_name() or inviter.get_username()) if inviter
           else reseller.name if reseller else "Trainyard")
    org = invitation.organisation.name
    body = "\n".join([
        f"{who} invites you to join {org} on Trainyard as {invitation.get_role_display().lower()}.",
        "", "Accept the invitation (you create your login there, or use the one you have):",
        _link("account:invitation", tokens.invitation_token(invitation)), "",
        f"The link works until {invitation.expires_at:%d %B %Y, %H:%M} UTC. If you did not expect "
        f"this, ignore it."])
    try:
        return mail.send(subject=f"[Trainyard] Join {org}", body=body, to=[invitation.email])
    except Exception:
        Invitation.objects.filter(pk=invitation_id).update(sent_at=None)  # the retry sends it
        raise


@shared_task(name="accounts.signup_verify_send", **RETRY)
def signup_verify_send_task(user_id: int) -> int:
    user = User.objects.filter(pk=user_id, is_active=False, last_login__isnull=True).first()
    if user is None:
        return 0  # verified already
    body = "\n".join([
        f"Welcome to Trainyard, {user.get_full_name() or user.get_username()}.", "",
        "Confirm your e-mail address to start using your account:",
        _link("account:signup-verify", tokens.signup_token(user)), "",
        f"The link works for {settings.ACCOUNT_LINK_VALID_HOURS} hours. If you did not sign up, "
        f"ignore this e-mail: the account stays locked."])
    return mail.send(subject="[Trainyard] Confirm your e-mail address", body=body, to=[user.email])


@shared_task(name="accounts.email_change_send", **RETRY)
def email_change_send_task(user_id: int, new_email: str) -> int:
    user = User.objects.filter(pk=user_id, is_active=True).first()
    if user is None or user.email.lower() == new_email.lower():
        return 0
    body = "\n".join([
        f"Someone (we hope you, {user.get_username()}) asked to use this address for their "
        f"Trainyard account. Confirm it:",
        _link("account:email-confirm", tokens.email_change_token(user, new_email)), "",
        f"The link works for {settings.ACCOUNT_LINK_VALID_HOURS} hours; until then the account "
        f"keeps its old address."])
    return mail.send(subject="[Trainyard] Confirm your new e-mail address", body=body,
                     to=[new_email])


def staff_recipients(role: str) -> list[str]:
    """E-mail addresses of the active staff with ``role`` (superusers hold every role)."""
    users = User.objects.filter(Q(staff_role=role) | Q(is_superuser=True), is_active=True)
    return sorted({u.email for u in users if u.email})


STAFF_NOTIFY = {"acks_late": True, "autoretry_for": (OSError,), "max_retries": 3, "retry_backoff": True}


@shared_task(name="accounts.staff_notify", **STAFF_NOTIFY)
def staff_notify_task(role: str, subject: str, body: str) -> int:
    """Sends one staff e-mail to everyone holding ``role`` (mail server blips are retried)."""
    to = staff_recipients(role)
    if not to:
        return 0
    return mail.send(subject=subject, body=body, to=to)


# The old name (it lived in the orders app): e-mails queued before an upgrade are still sent.
@shared_task(name="orders.staff_notify", **STAFF_NOTIFY)
def staff_notify_old_name_task(role: str, subject: str, body: str) -> int:
    return staff_notify_task(role, subject, body)


@shared_task(name="accounts.retention", **RETENTION_TASK_OPTIONS)
def retention_task() -> dict:
    """Beat: expired sessions (clearsessions) and django-axes' log-in log past its window."""
    deleted = (sessions_clear_expired(now=timezone.now())
               + login_logs_prune())
    return dict(deleted)


# What a security notice says, by event (portal.accounts.two_factor.Event, and a password change).
_NOTICES = {
    "enabled": ("Two-factor sign-in is on",
                "Two-factor sign-in was turned on for your account: from now on you sign in with "
                "your password and a code from your authenticator app. Keep your recovery codes "
                "somewhere safe."),
    "disabled": ("Two-factor sign-in is off",
                 "Two-factor sign-in was turned off for your account: your password alone now "
                 "signs you in."),
    "codes_regenerated": ("New recovery codes",
                          "New recovery codes were made for your account; the old ones no longer "
                          "work."),
    "recovery_code_used": ("A recovery code was used",
                           "Someone signed in to your account with one of your recovery codes. "
                           "Each code works once; make new ones on your account page if few are "
                           "left."),
    "reset_by_staff": ("Two-factor sign-in was reset",
                       "Our support removed your authenticator app and recovery codes (a lost "
                       "phone, say). If two-factor sign-in is required for you, your next sign-in "
                       "sets up a new app."),
    "password_changed": ("Your password was changed",
                         "The password of your account was changed."),
}


@shared_task(name="accounts.security_notice_send", **RETRY)
def security_notice_task(user_id: int, event: str) -> int:
    """A security notice to the person: two-factor turned on or off, new recovery codes, a code
    used, a reset by support, a changed password. Sent whoever did it, so a stranger's change is
    noticed."""
    user = User.objects.filter(pk=user_id).first()
    if user is None or not user.email or event not in _NOTICES:
        return 0
    title, text = _NOTICES[event]
    body = "\n".join([
        f"Hello {user.get_full_name() or user.get_username()},", "", text, "",
        f"If this was not you, change your password ({_page('password_change')}) and write to "
        f"{settings.SUPPORT_EMAIL} at once.", "",
        f"Your account: {_page('account:settings')}"])
    return mail.send(subject=f"[Trainyard] {title}", body=body, to=[user.email])


def _page(name: str) -> str:
    return settings.SITE_URL.rstrip("/") + reverse(name)
