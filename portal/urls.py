from csp.decorators import csp_update
from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal.accounts.views_two_factor import PasswordChangeView, PasswordResetConfirmView
from portal.api.views import ApiNotFound
from portal.core import views as core_views
from provisioning.monitoring import views as monitoring_views

urlpatterns = [
    path("", core_views.home, name="home"),
    path("healthz", core_views.healthz, name="healthz"),
    # Django's password views, but each change of a password is e-mailed to the person.
    path("accounts/password_change/", PasswordChangeView.as_view(), name="password_change"),
    path("accounts/reset/<uidb64>/<token>/", PasswordResetConfirmView.as_view(),
         name="password_reset_confirm"),
    # Pages that do not extend base.html (the admin's) leave the browser asking for this.
    path("favicon.ico", core_views.favicon, name="favicon"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("orgs/", include("portal.accounts.urls")),
    path("account/", include("portal.accounts.urls_account")),
    path("catalog/", include("portal.catalog.urls")),
    path("sizing/", include("portal.sizing.urls")),
    path("orders/", include("portal.orders.urls")),
    path("billing/", include("portal.billing.urls")),
    path("configure/", include("portal.quotes.urls")),
    path("ops/billing/", include("provisioning.staff.billing_urls")),
    path("ops/", include("provisioning.staff.urls")),
    path("api/v1/", include("portal.api.v1.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file, so no inline script runs; Swagger UI
    # (React) sets style attributes, so this developer page alone allows inline styles.
    path("api/docs/", csp_update({"style-src": ["'unsafe-inline'"]})(
        SpectacularSwaggerSplitView.as_view(url_name="api-schema")), name="api-docs"),
    # Anything else under /api/ is a JSON 404, never the HTML debug page (`/api/schema` and
    # `/api/docs` without their slash still get APPEND_SLASH's redirect).
    re_path(r"^api/(?!schema$|docs$)", ApiNotFound.as_view(), name="api-not-found"),
    path("admin/", admin.site.urls),
]
# Monitoring: Prometheus's scrape targets and Alertmanager's webhook (bearer tokens).
# and the portal's own metrics (Prometheus's token or a staff session).
urlpatterns += [path("monitoring/", include("provisioning.monitoring.urls")),
                path("metrics", monitoring_views.portal_metrics, name="metrics")]
handler500 = "portal.api.views.server_error"  # a problem+json body under /api/
