"""Who belongs to an organisation: invitations by e-mail, roles, removing members, deactivating
an account, and self sign-up (when the operator turns it on).

Organisation admins manage their own organisation's members; a reseller admin also those of
its customer organisations; hosting staff any. An API key of a reseller acts for its customers.
E-mails go out through Celery tasks queued after the commit (``portal.accounts.tasks``).

When someone leaves an organisation (removed, or their account deactivated), their personal SSH
keys must leave its servers: apps above accounts hear it through the ``members_left`` signal
accounts declares (``portal.accounts.signals``; provisioning queues a key sync), so accounts
imports none of them.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from portal.accounts import tasks
from portal.accounts.models import Invitation, Membership, Organisation, User
from portal.accounts.principals import ApiKeyPrincipal, api_key_of
from portal.accounts.signals import members_left

R = Membership.Role
ADMIN_ROLES = frozenset({R.ADMIN, R.RESELLER_ADMIN})


# --- who may do what ----------------------------------------------------------------------------
def can_manage_members(user, organisation: Organisation) -> bool:
    """Staff; an admin of ``organisation``; a reseller admin of it or of its reseller; a
    reseller's API key for itself and its customers."""
    if isinstance(user, ApiKeyPrincipal):
        own = user.organisation
        return organisation.pk == own.pk or organisation.parent_id == own.pk
    if not getattr(user, "is_authenticated", False):
        return False
    if user.is_hosting_staff:
        return True
    mine = Membership.objects.filter(user=user)
    return (mine.filter(organisation=organisation, role__in=ADMIN_ROLES).exists()
            or (organisation.parent_id is not None
                and mine.filter(organisation_id=organisation.parent_id,
                                role=R.RESELLER_ADMIN).exists()))


def roles_for(organisation: Organisation) -> list[tuple[str, str]]:
    """The roles a member of ``organisation`` can have."""
    admin = R.RESELLER_ADMIN if organisation.kind == Organisation.Kind.RESELLER else R.ADMIN
    return [(R.MEMBER, R.MEMBER.label), (admin, admin.label)]


def _require_manager(by, organisation: Organisation) -> None:
    if not can_manage_members(by, organisation):
        raise PermissionDenied(f"Only an admin of {organisation.name} can manage its members.")


def _check_role(organisation: Organisation, role: str) -> str:
    allowed = dict(roles_for(organisation))
    if role not in allowed:
        raise ValidationError({"role": f"Choose one of: {', '.join(allowed.values())}."})
    return role


def _is_last_admin(membership: Membership) -> bool:
    admins = Membership.objects.filter(organisation_id=membership.organisation_id,
                                       role__in=ADMIN_ROLES, user__is_active=True)
    return membership.role in ADMIN_ROLES and not admins.exclude(pk=membership.pk).exists()


def _members_changed(organisation_ids, *, by=None) -> None:
    """Tells the apps above accounts (provisioning: the key sync of the servers)."""
    members_left.send(sender=Membership, organisation_ids=list(organisation_ids), by=by)


def _queue(task, *args) -> None:
    transaction.on_commit(lambda: tasks.queue(task, *args))


# --- invitations --------------------------------------------------------------------------------
@transaction.atomic
def invitation_create(*, organisation: Organisation, email: str, role: str = R.MEMBER,
                      by) -> Invitation:
    """Invites ``email`` to join ``organisation`` as ``role``; the link goes out by e-mail after
    the commit. ValidationError by field; an earlier pending invitation of the same address is
    revoked, so only the newest link works."""
    _require_manager(by, organisation)
    email = (email or "").strip()
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationError({"email": "Give the e-mail address of the person to invite."}) from None
    _check_role(organisation, role)
    if Membership.objects.filter(organisation=organisation, user__email__iexact=email,
                                 user__is_active=True).exists():
        raise ValidationError({"email": f"{email} is already a member of {organisation.name}."})
    now = timezone.now()
    pending(organisation).filter(email__iexact=email).update(revoked_at=now)
    invitation = Invitation.objects.create(
        organisation=organisation, email=email, role=role,
        invited_by=by if getattr(by, "pk", None) else None, invited_by_key=api_key_of(by),
        expires_at=now + timedelta(days=settings.INVITATION_VALID_DAYS))
    _queue(tasks.invitation_send_task, invitation.pk)
    return invitation


def pending(organisation: Organisation):
    return Invitation.objects.filter(organisation=organisation, accepted_at__isnull=True,
                                     revoked_at__isnull=True, expires_at__gt=timezone.now())


def invitation_revoke(*, invitation: Invitation, by) -> Invitation:
    _require_manager(by, invitation.organisation)
    Invitation.objects.filter(pk=invitation.pk, accepted_at__isnull=True,
                              revoked_at__isnull=True).update(revoked_at=timezone.now())
    invitation.refresh_from_db()
    return invitation


class InvitationUnusable(ValueError):
    """The link no longer works; the message says why and what to do."""


def invitation_problem(invitation: Invitation | None) -> str:
    """Why an invitation link cannot be used ("" when it can)."""
    if invitation is None:
        return "This invitation link is not valid. Ask for a new invitation."
    state = invitation.state_at(timezone.now())
    return {
        "accepted": "This invitation was already accepted. Log in to continue.",
        "revoked": "This invitation was withdrawn. Ask the organisation's admin for a new one.",
        "expired": f"This invitation expired on {invitation.expires_at:%d %B %Y}. Ask "
                   f"{invitation.organisation.name}'s admin to invite you again.",
    }.get(state, "")


def invitation_addressee_problem(invitation: Invitation, user) -> str:
    """Why ``user`` may not accept ``invitation`` ("" when they may): an invitation is for the
    address it was sent to (compared without case), not for whoever holds the link."""
    if (user.email or "").strip().lower() == invitation.email.strip().lower():
        return ""
    signed_in = user.get_username() + (f" ({user.email})" if user.email else "")
    return (f"This invitation is for {invitation.email}; you are signed in as {signed_in}. Log out "
            f"and open the link again to accept it as {invitation.email}, or ask an admin of "
            f"{invitation.organisation.name} to invite your own address.")


@transaction.atomic
def invitation_accept(*, invitation: Invitation, user: User) -> Membership:
    """``user`` joins the invitation's organisation with its role (a member already keeps the
    role they have). Only the invited address's account may (PermissionDenied otherwise). The
    invitation works once: a conditional UPDATE claims it."""
    if problem := invitation_problem(invitation):
        raise InvitationUnusable(problem)
    if problem := invitation_addressee_problem(invitation, user):
        raise PermissionDenied(problem)
    claimed = Invitation.objects.filter(
        pk=invitation.pk, accepted_at__isnull=True, revoked_at__isnull=True,
        expires_at__gt=timezone.now()).update(accepted_at=timezone.now(), accepted_by=user)
    if claimed != 1:
        raise InvitationUnusable("This invitation was already used. Log in to continue.")
    membership, _ = Membership.objects.get_or_create(
        user=user, organisation_id=invitation.organisation_id, defaults={"role": invitation.role})
    return membership


@transaction.atomic
def invitation_accept_as_new_user(*, invitation: Invitation, username: str, password: str,
                                  first_name: str = "") -> User:
    """Creates the account of the invited address (the link proved it) and accepts."""
    if problem := invitation_problem(invitation):
        raise InvitationUnusable(problem)
    user = _user_create(username=username, email=invitation.email, password=password,
                        first_name=first_name, active=True)
    invitation_accept(invitation=invitation, user=user)
    return user


# --- members ------------------------------------------------------------------------------------
@transaction.atomic
def member_set_role(*, membership: Membership, role: str, by) -> Membership:
    _require_manager(by, membership.organisation)
    _check_role(membership.organisation, role)
    if role not in ADMIN_ROLES and _is_last_admin(membership):
        raise ValidationError({"role": f"{membership.user.get_username()} is the last admin of "
                                       f"{membership.organisation.name}: make someone else admin "
                                       f"first."})
    Membership.objects.filter(pk=membership.pk).update(role=role)
    membership.refresh_from_db()
    return membership


@transaction.atomic
def member_remove(*, membership: Membership, by) -> None:
    """Removes the member; their personal SSH keys leave the organisation's servers."""
    _require_manager(by, membership.organisation)
    if _is_last_admin(membership):
        raise ValidationError({"member": f"{membership.user.get_username()} is the last admin of "
                                         f"{membership.organisation.name}: make someone else "
                                         f"admin first."})
    organisation_id = membership.organisation_id
    Membership.objects.filter(pk=membership.pk).delete()
    _members_changed([organisation_id], by=by)


@transaction.atomic
def user_deactivate(*, user: User, by=None) -> User:
    """The account can no longer log in, and its personal SSH keys leave every server of its
    organisations (staff: the admin site)."""
    User.objects.filter(pk=user.pk).update(is_active=False)
    user.refresh_from_db()
    _members_changed(user.memberships.values_list("organisation_id", flat=True), by=by)
    return user


# --- the signed-in person's own account ----------------------------------------------------------
def email_change_request(*, user: User, new_email: str) -> str:
    """Sends a confirmation link to ``new_email``; the address changes when it is followed."""
    new_email = (new_email or "").strip()
    try:
        validate_email(new_email)
    except ValidationError:
        raise ValidationError({"email": "Give a valid e-mail address."}) from None
    if new_email.lower() == (user.email or "").lower():
        raise ValidationError({"email": "That is already your e-mail address."})
    if User.objects.filter(email__iexact=new_email).exclude(pk=user.pk).exists():
        raise ValidationError({"email": "Another account uses that e-mail address."})
    with transaction.atomic():
        _queue(tasks.email_change_send_task, user.pk, new_email)
    return new_email


def email_change_confirm(*, user: User, new_email: str) -> User:
    if User.objects.filter(email__iexact=new_email).exclude(pk=user.pk).exists():
        raise ValidationError({"email": "Another account took that e-mail address meanwhile."})
    User.objects.filter(pk=user.pk).update(email=new_email)
    user.refresh_from_db()
    return user


# --- self sign-up (SIGNUP_ENABLED) --------------------------------------------------------------
@transaction.atomic
def signup(*, organisation_name: str, username: str, email: str, password: str,
           first_name: str = "") -> User:
    """A new customer organisation with its first admin, whose account works once the link sent
    to ``email`` is followed. PermissionDenied unless the operator turned sign-up on."""
    if not settings.SIGNUP_ENABLED:
        raise PermissionDenied("Sign-up is not open; ask for an invitation.")
    name = " ".join((organisation_name or "").split())
    slug = slugify(name)[:50]
    if not slug:
        raise ValidationError({"organisation_name": "Give your organisation's name."})
    if Organisation.objects.filter(slug=slug).exists():
        raise ValidationError({"organisation_name": f"An organisation called {name} already "
                                                    f"exists; ask its admin to invite you."})
    try:
        validate_email((email or "").strip())
    except ValidationError:
        raise ValidationError({"email": "Give a valid e-mail address."}) from None
    if User.objects.filter(email__iexact=email.strip()).exists():
        raise ValidationError({"email": "An account with this e-mail address exists: log in, or "
                                        "reset its password."})
    user = _user_create(username=username, email=email.strip(), password=password,
                        first_name=first_name, active=False)
    organisation = Organisation.objects.create(name=name, slug=slug)
    Membership.objects.create(user=user, organisation=organisation, role=R.ADMIN)
    _queue(tasks.signup_verify_send_task, user.pk)
    return user


def signup_verify(*, user: User) -> bool:
    """Activates a signed-up account; False when it was active already (a second click)."""
    return User.objects.filter(pk=user.pk, is_active=False, last_login__isnull=True).update(
        is_active=True) == 1


def _user_create(*, username: str, email: str, password: str, first_name: str,
                 active: bool) -> User:
    username = (username or "").strip()
    field = User._meta.get_field("username")
    try:
        field.run_validators(username)
    except ValidationError as exc:
        raise ValidationError({"username": exc.messages}) from None
    if not username:
        raise ValidationError({"username": "Choose a username."})
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError({"username": f"The username {username} is taken; choose another."})
    candidate = User(username=username, email=email, first_name=first_name.strip()[:150])
    try:
        validate_password(password, user=candidate)
    except ValidationError as exc:
        raise ValidationError({"password": exc.messages}) from None
    candidate.set_password(password)
    candidate.is_active = active
    try:
        with transaction.atomic():
            candidate.save()
    except IntegrityError:  # the same username taken at the same moment
        raise ValidationError({"username": f"The username {username} is taken; choose "
                                           f"another."}) from None
    return candidate


# --- security notices ---------------------------------------------------------------------------
def password_changed(*, user) -> None:
    """Tells the person by e-mail that their password changed (on their page or by a reset link),
    so a change they did not make does not go unnoticed."""
    _queue(tasks.security_notice_task, user.pk, "password_changed")
