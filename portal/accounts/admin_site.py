"""Django's admin behind the second factor: its pages need a session that passed one (staff
always have one), and its login page is the portal's (password, then token; throttled by axes)."""

from urllib.parse import urlencode

from django.contrib.admin import AdminSite
from django.contrib.admin.apps import AdminConfig
from django.shortcuts import redirect
from django.urls import reverse


class TwoFactorAdminSite(AdminSite):
    def has_permission(self, request):
        return super().has_permission(request) and request.user.is_verified()

    def login(self, request, extra_context=None):
        target = request.GET.get("next") or reverse("admin:index")
        return redirect(f"{reverse('login')}?{urlencode({'next': target})}")


class TwoFactorAdminConfig(AdminConfig):
    default_site = "portal.accounts.admin_site.TwoFactorAdminSite"
