"""Two-factor sign-in pages: set up the app, type a token after the password, see recovery codes
once, manage (new codes, turn off); an organisation admin's requirement; the password views that
send a notice. Adapters over ``portal.accounts.two_factor``."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST
from django_otp import login as otp_login

from portal.accounts import team, two_factor
from portal.accounts.forms import OrganisationTwoFactorForm, TokenForm
from portal.accounts.middleware import two_factor_exempt
from portal.accounts.selectors import organisations_for
from portal.core.shown_once import keep_for_next_page, pop_shown_once

NEW_CODES_SESSION = "accounts.new_recovery_codes"  # encrypted; popped by the page that shows them
NEXT_SESSION = "accounts.two_factor_next"


def _next_url(request, fallback: str = "home") -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                       require_https=request.is_secure()):
        return target
    return reverse(fallback)


def _app_help() -> str:
    return "The 6 digits your authenticator app shows for Trainyard."


def _signed_in_fully(request, device) -> None:
    """The session passed its second factor: a new session key for the greater rights (as
    Django's login does for the password), then django-otp records the device in it."""
    request.session.cycle_key()
    otp_login(request, device)


# --- sign-in: the token after the password ------------------------------------------------------
@never_cache
@two_factor_exempt
@login_required
@require_http_methods(["GET", "POST"])
def two_factor_verify(request):
    if request.user.is_verified() or two_factor.confirmed_app(request.user) is None:
        return redirect(_next_url(request))
    form = TokenForm(request.POST or None, help_text=_app_help() + " Lost your phone? Type one of "
                     "your recovery codes instead.")
    if request.method == "POST" and form.is_valid():
        try:
            device = two_factor.verify(user=request.user, token=form.cleaned_data["token"])
        except two_factor.TokenRefused as exc:
            form.add_error("token", str(exc))
        else:
            _signed_in_fully(request, device)
            if device.name == two_factor.RECOVERY_DEVICE_NAME:
                left = two_factor.recovery_codes_left(request.user)
                messages.warning(request, f"You signed in with a recovery code; {left} left. Make "
                                          f"new ones on your account page if you are running low.")
            return redirect(_next_url(request))
    return render(request, "accounts/two_factor_verify.html", {
        "form": form, "next": _next_url(request), "support_email": settings.SUPPORT_EMAIL},
        status=400 if form.errors else 200)


# --- setting up the app -------------------------------------------------------------------------
@never_cache  # the page shows the app's secret
@two_factor_exempt
@login_required
@require_http_methods(["GET", "POST"])
def two_factor_setup(request):
    user = request.user
    if two_factor.confirmed_app(user) is not None and not user.is_verified():
        return redirect(f"{reverse('account:two-factor-verify')}?next={reverse('account:two-factor')}")
    device = two_factor.enrolment_device(user)
    form = TokenForm(request.POST or None, label="Code from the app", help_text=_app_help())
    if request.method == "POST" and form.is_valid():
        try:
            codes = two_factor.enrolment_confirm(user=user, device=device,
                                                 token=form.cleaned_data["token"])
        except ValidationError as exc:
            form.add_error("token", exc.message_dict["token"])
        else:
            device.refresh_from_db()
            _signed_in_fully(request, device)
            keep_for_next_page(request, NEW_CODES_SESSION, "\n".join(codes))
            request.session[NEXT_SESSION] = _next_url(request, fallback="account:two-factor")
            return redirect("account:two-factor-codes")
    return render(request, "accounts/two_factor_setup.html", {
        "form": form, "qr_svg": two_factor.qr_svg(device), "manual_key": two_factor.manual_key(device),
        "required": two_factor.required_reason(user), "next": request.GET.get("next", ""),
        "replacing": two_factor.confirmed_app(user) is not None,
    }, status=400 if form.errors else 200)


@never_cache  # the codes are shown once: no cache keeps a copy
@login_required
def two_factor_codes(request):
    codes = pop_shown_once(request, NEW_CODES_SESSION)
    if codes is None:
        messages.info(request, "Recovery codes are shown once, when they are made. Make new ones "
                               "here if you lost them.")
        return redirect("account:two-factor")
    return render(request, "accounts/two_factor_codes.html", {
        "codes": codes.split("\n"),
        "continue_url": request.session.pop(NEXT_SESSION, reverse("account:two-factor"))})


# --- managing it --------------------------------------------------------------------------------
@never_cache
@login_required
@require_http_methods(["GET"])
def two_factor_manage(request):
    return render(request, "accounts/two_factor.html", {
        "status": two_factor.status_of(request.user),
        "disable_form": TokenForm(label="Current code", help_text=_app_help() + " Or a recovery code.")})


@login_required
@require_POST
def two_factor_codes_regenerate(request):
    try:
        codes = two_factor.recovery_codes_regenerate(user=request.user)
    except PermissionDenied as exc:
        messages.error(request, str(exc))
        return redirect("account:two-factor")
    keep_for_next_page(request, NEW_CODES_SESSION, "\n".join(codes))
    request.session[NEXT_SESSION] = reverse("account:two-factor")
    return redirect("account:two-factor-codes")


@login_required
@require_POST
def two_factor_disable(request):
    form = TokenForm(request.POST, label="Current code", help_text=_app_help() + " Or a recovery code.")
    if form.is_valid():
        try:
            two_factor.two_factor_disable(user=request.user, token=form.cleaned_data["token"])
        except PermissionDenied as exc:
            messages.error(request, str(exc))
            return redirect("account:two-factor")
        except ValidationError as exc:
            form.add_error("token", exc.message_dict["token"])
        else:
            messages.success(request, "Two-factor sign-in is off: your password alone signs you in.")
            return redirect("account:settings")
    return render(request, "accounts/two_factor.html", {
        "status": two_factor.status_of(request.user), "disable_form": form}, status=400)


# --- an organisation's requirement --------------------------------------------------------------
@login_required
@require_POST
def organisation_two_factor(request, slug):
    organisation = get_object_or_404(organisations_for(request.user), slug=slug)
    form = OrganisationTwoFactorForm(request.POST)
    form.is_valid()  # a checkbox: absent means off
    required = bool(form.cleaned_data.get("require_two_factor"))
    try:
        two_factor.organisation_require_set(organisation=organisation, required=required,
                                            by=request.user)
    except (PermissionDenied, ValidationError) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    else:
        messages.success(request, f"{organisation.name} now requires two-factor sign-in of every "
                                  f"member." if required else
                         f"{organisation.name} no longer requires two-factor sign-in; members "
                         f"who have it keep it.")
    return redirect(reverse("accounts:organisation", args=[slug]) + "#two-factor")


# --- password views that send a notice ----------------------------------------------------------
class PasswordChangeView(auth_views.PasswordChangeView):
    def form_valid(self, form):
        response = super().form_valid(form)
        team.password_changed(user=form.user)
        return response


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    def form_valid(self, form):
        response = super().form_valid(form)
        team.password_changed(user=form.user)
        return response
