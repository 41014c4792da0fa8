from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from portal.core.health import health_report


def home(request):
    if not request.user.is_authenticated:
        return redirect("catalog:list")
    return render(request, "home.html")


@never_cache
def healthz(request):
    report = health_report()
    healthy = report["database"] == "ok" and report["broker"] == "ok"
    return JsonResponse(report, status=200 if healthy else 503)
