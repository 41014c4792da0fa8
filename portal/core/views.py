from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.cache import never_cache

from portal.accounts.selectors import organisations_for
from portal.core.health import health_report
from portal.orders.selectors import orders_for, quotes_open
from portal.orders.states import ORDER_FINAL
from portal.quotes.selectors import quotes_visible
from provisioning.selectors import staff_dashboard

DASHBOARD_ROWS = 5


def home(request):
    if not request.user.is_authenticated:
        return redirect("catalog:list")
    if request.user.is_hosting_staff:
        return render(request, "staff_home.html", staff_dashboard(request.user, rows=DASHBOARD_ROWS))
    live_orders = orders_for(request.user).exclude(state__in=ORDER_FINAL)
    open_quotes = quotes_open(quotes_visible(organisations=organisations_for(request.user)))
    return render(request, "home.html", {
        "orders": live_orders.order_by("-created_at")[:DASHBOARD_ROWS],
        "quotes": open_quotes.order_by("-created_at")[:DASHBOARD_ROWS],
    })


@never_cache
def healthz(request):
    report = health_report()
    healthy = report["database"] == "ok" and report["broker"] == "ok"
    return JsonResponse(report, status=200 if healthy else 503)


def favicon(request):
    """/favicon.ico, which browsers ask for on pages without our <link rel="icon"> (the admin's)."""
    return redirect(static("img/favicon.svg"), permanent=True)
