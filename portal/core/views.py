from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.cache import never_cache

from portal.core.health import health_report
from portal.orders.selectors import customer_home
from provisioning.staff.home_views import staff_home

DASHBOARD_ROWS = 5


def home(request):
    if not request.user.is_authenticated:
        return redirect("catalog:list")
    if request.user.is_hosting_staff:
        return staff_home(request, rows=DASHBOARD_ROWS)
    return render(request, "home.html", customer_home(request.user, rows=DASHBOARD_ROWS))


@never_cache
def healthz(request):
    report = health_report()
    healthy = report["database"] == "ok" and report["broker"] == "ok"
    return JsonResponse(report, status=200 if healthy else 503)


def favicon(request):
    """/favicon.ico, which browsers ask for on pages without our <link rel="icon"> (the admin's)."""
    return redirect(static("img/favicon.svg"), permanent=True)
