"""Team pages: invite, change a member's role, remove a member, withdraw an invitation; accept
an invitation; the signed-in person's account (e-mail, password); self sign-up when it is on.
Adapters: look the organisation up in the person's scope (outsiders: 404), call
``portal.accounts.team``, render."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from portal.accounts import team, tokens, two_factor
from portal.accounts.forms import (
    AcceptAsNewUserForm,
    EmailChangeForm,
    InviteForm,
    RoleForm,
    SignupForm,
)
from portal.accounts.models import Membership, User
from portal.accounts.selectors import organisations_for
from portal.accounts.views import organisation_context
from portal.core.forms import add_service_errors

BACKEND = "django.contrib.auth.backends.ModelBackend"


def _organisation(request, slug):
    return get_object_or_404(organisations_for(request.user), slug=slug)


def _membership(request, slug, membership_id: int):
    """(organisation, one of its memberships) the user may see; 404 otherwise."""
    organisation = _organisation(request, slug)
    return organisation, get_object_or_404(Membership.objects.select_related("user", "organisation"),
                                           pk=membership_id, organisation=organisation)


def _members_url(organisation) -> str:
    return reverse("accounts:organisation", args=[organisation.slug]) + "#members"


# --- managing members ---------------------------------------------------------------------------
@login_required
@require_POST
def member_invite(request, slug):
    organisation = _organisation(request, slug)
    form = InviteForm(request.POST, roles=team.roles_for(organisation))
    if form.is_valid():
        try:
            invitation = team.invitation_create(organisation=organisation, by=request.user,
                                                **form.cleaned_data)
        except PermissionDenied as exc:
            messages.error(request, str(exc))
            return redirect(_members_url(organisation))
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"Invitation sent to {invitation.email}: the link works for "
                                      f"{settings.INVITATION_VALID_DAYS} days.")
            return redirect(_members_url(organisation))
    return render(request, "accounts/organisation_detail.html",
                  organisation_context(request, organisation, invite_form=form), status=400)


@login_required
@require_POST
def member_role(request, slug, membership_id: int):
    organisation, membership = _membership(request, slug, membership_id)
    form = RoleForm(request.POST, roles=team.roles_for(organisation))
    try:
        if not form.is_valid():
            raise ValidationError({"role": "Choose a role."})
        team.member_set_role(membership=membership, role=form.cleaned_data["role"], by=request.user)
        messages.success(request, f"{membership.user.get_username()} is now "
                                  f"{membership.get_role_display().lower()}.")
    except (PermissionDenied, ValidationError) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    return redirect(_members_url(organisation))


@login_required
@require_POST
def member_remove(request, slug, membership_id: int):
    organisation, membership = _membership(request, slug, membership_id)
    if request.POST.get("confirm") != "yes":
        messages.error(request, "Nobody was removed: confirm it first.")
        return redirect(_members_url(organisation))
    try:
        team.member_remove(membership=membership, by=request.user)
        messages.success(request, f"{membership.user.get_username()} was removed from "
                                  f"{organisation.name}; their own SSH keys leave its servers "
                                  f"within a minute or two.")
    except (PermissionDenied, ValidationError) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    if membership.user_id == request.user.pk and not organisations_for(request.user).filter(
            pk=organisation.pk).exists():
        return redirect("account:settings")
    return redirect(_members_url(organisation))


@login_required
@require_POST
def invitation_revoke(request, slug, reference: str):
    organisation = _organisation(request, slug)
    invitation = get_object_or_404(organisation.invitations, reference=reference)
    try:
        team.invitation_revoke(invitation=invitation, by=request.user)
        messages.success(request, f"The invitation of {invitation.email} was withdrawn; its link "
                                  f"no longer works.")
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    return redirect(_members_url(organisation))


# --- accepting an invitation --------------------------------------------------------------------
@never_cache
@require_http_methods(["GET", "POST"])
def invitation_accept(request, token: str):
    invitation = tokens.invitation_from_token(token)
    problem = team.invitation_problem(invitation)
    form = AcceptAsNewUserForm(request.POST or None)
    has_account = invitation is not None and User.objects.filter(
        email__iexact=invitation.email, is_active=True).exists()
    wrong_account = ("" if problem or not request.user.is_authenticated
                     else team.invitation_addressee_problem(invitation, request.user))
    if request.method == "POST" and not problem:
        try:
            if request.user.is_authenticated:
                team.invitation_accept(invitation=invitation, user=request.user)
                return _joined(request, invitation)
            if form.is_valid():
                user = team.invitation_accept_as_new_user(
                    invitation=invitation, username=form.cleaned_data["username"],
                    password=form.cleaned_data["password"], first_name=form.cleaned_data["first_name"])
                login(request, user, backend=BACKEND)
                return _joined(request, invitation)
        except team.InvitationUnusable as exc:
            problem = str(exc)
        except PermissionDenied as exc:  # another account than the invited address's
            wrong_account = str(exc)
        except ValidationError as exc:
            add_service_errors(form, exc)
    status = 410 if problem and invitation is not None else 404 if problem else \
        403 if wrong_account and request.method == "POST" else (400 if form.is_bound else 200)
    return render(request, "accounts/invitation.html", {
        "invitation": invitation, "problem": problem, "form": form, "has_account": has_account,
        "wrong_account": wrong_account,
        "member_already": request.user.is_authenticated and invitation is not None
        and invitation.organisation.memberships.filter(user=request.user).exists(),
    }, status=status)


def _joined(request, invitation):
    messages.success(request, f"Welcome to {invitation.organisation.name}.")
    return redirect("accounts:organisation", slug=invitation.organisation.slug)


# --- the signed-in person's account -------------------------------------------------------------
@login_required
def account_settings(request):
    memberships = request.user.memberships.select_related("organisation").order_by(
        "organisation__name")
    return render(request, "accounts/account.html", {"memberships": memberships,
                                                     "two_factor": two_factor.status_of(request.user)})


@login_required
@require_http_methods(["GET", "POST"])
def email_change(request):
    form = EmailChangeForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            new_email = team.email_change_request(user=request.user,
                                                  new_email=form.cleaned_data["email"])
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            messages.success(request, f"We sent a link to {new_email}; your address changes when "
                                      f"you follow it.")
            return redirect("account:settings")
    return render(request, "accounts/email_change.html", {"form": form},
                  status=400 if form.is_bound else 200)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def email_confirm(request, token: str):
    found = tokens.email_change_from_token(token)
    if found is None or found[0].pk != request.user.pk:
        return render(request, "accounts/link_problem.html", {
            "title": "This link no longer works",
            "text": "It expired, was used already, or belongs to another account. Ask for a new "
                    "one from your account page."}, status=410)
    user, new_email = found
    if request.method == "POST":
        try:
            team.email_change_confirm(user=user, new_email=new_email)
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        else:
            messages.success(request, f"Your e-mail address is now {new_email}.")
        return redirect("account:settings")
    return render(request, "accounts/email_confirm.html", {"new_email": new_email})


# --- self sign-up (SIGNUP_ENABLED) --------------------------------------------------------------
@require_http_methods(["GET", "POST"])
def signup(request):
    if not settings.SIGNUP_ENABLED:
        raise Http404("Sign-up is not open.")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = {k: v for k, v in form.cleaned_data.items() if k != "password_again"}
        try:
            user = team.signup(**data)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            return render(request, "accounts/signup_sent.html", {"email": user.email})
    return render(request, "accounts/signup.html", {"form": form},
                  status=400 if form.is_bound else 200)


@never_cache
@require_http_methods(["GET", "POST"])
def signup_verify(request, token: str):
    user = tokens.user_from_signup_token(token)
    if user is None:
        return render(request, "accounts/link_problem.html", {
            "title": "This link no longer works",
            "text": "It expired or is not complete. Sign up again, or log in if you confirmed "
                    "your address already."}, status=410)
    if request.method == "POST":
        if team.signup_verify(user=user):
            login(request, user, backend=BACKEND)
            messages.success(request, "Your e-mail address is confirmed: welcome to Trainyard.")
            return redirect("home")
        messages.info(request, "This address was confirmed already: log in.")
        return redirect("login")
    return render(request, "accounts/signup_verify.html", {"pending_user": user})
