"""The second step of sign-in: a session past the password but not past a second factor it needs
reaches only the token page (or, without an app yet, enrolment), logging in and out.

Runs after django-otp's OTPMiddleware (``request.user.is_verified()``). Under ``/api/`` such a
session counts for nothing (the request goes on as anonymous, so an API key still works and a
cookie alone gets a 401/403); an htmx request is told to load the step's page (HX-Redirect).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from portal.accounts.two_factor import LoginStep, login_step

# Django's own views the half-signed-in may reach (by view name, so not the admin's "admin:login");
# ours say so with the decorator.
_OPEN_VIEW_NAMES = frozenset({"login", "logout"})


def two_factor_exempt(view):
    """A view the half-signed-in may reach: the steps of sign-in themselves."""
    view.two_factor_exempt = True
    return view


class TwoFactorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.two_factor_step = LoginStep.DONE
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        user = request.user
        if not user.is_authenticated or user.is_verified():
            return None
        step = login_step(user)
        if step == LoginStep.DONE:
            return None
        request.two_factor_step = step  # the nav shows only "Log out" meanwhile
        if request.path_info.startswith("/api/"):
            request.user = AnonymousUser()  # DRF's session authentication reads this one
            return None
        match = request.resolver_match
        if getattr(view_func, "two_factor_exempt", False) or (match and match.view_name in _OPEN_VIEW_NAMES):
            return None
        target = reverse("account:two-factor-verify" if step == LoginStep.VERIFY
                         else "account:two-factor-setup")
        if request.method == "GET" and not request.htmx:
            target += "?" + urlencode({"next": request.get_full_path()})
        if request.htmx:
            response = HttpResponse(status=204)
            response["HX-Redirect"] = target
            return response
        return redirect(target)
