"""Endpoints machines call: Prometheus's service discovery (scrape targets) and Alertmanager's
webhook (alerts). Each authenticates by its own bearer token; no session, no CSRF."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from portal.core.metrics import CONTENT_TYPE, exposition
from provisioning.monitoring.alerts import PayloadError, alerts_receive, parse_payload
from provisioning.monitoring.auth import bearer_matches
from provisioning.monitoring.targets import EXPORTERS, scrape_targets


def _unauthorised() -> HttpResponse:
    response = HttpResponse("A valid bearer token is required.\n", status=401,
                            content_type="text/plain; charset=utf-8")
    response["WWW-Authenticate"] = 'Bearer realm="trainyard-monitoring"'
    return response


@never_cache
@require_GET
def targets(request, exporter: str):
    """Prometheus HTTP service discovery: the nodes whose ``exporter`` it scrapes."""
    if not bearer_matches(request, settings.MONITORING_TOKEN):
        return _unauthorised()
    if exporter not in EXPORTERS:
        return JsonResponse({"detail": f"unknown exporter; one of {', '.join(EXPORTERS)}"},
                            status=404)
    return JsonResponse(scrape_targets(exporter), safe=False)


@csrf_exempt
@require_POST
def alerts(request):
    """Alertmanager's webhook receiver (``webhook_configs`` with ``send_resolved: true``)."""
    if not bearer_matches(request, settings.MONITORING_ALERT_TOKEN):
        return _unauthorised()
    try:
        incoming = parse_payload(request.body)
    except PayloadError as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    result = alerts_receive(incoming)
    return JsonResponse({"opened": result.opened, "resolved": result.resolved,
                         "ignored": result.ignored})


@never_cache
@require_GET
def portal_metrics(request):
    """The portal's own metrics for Prometheus (bearer token) or a signed-in staff member."""
    user = request.user
    if not (bearer_matches(request, settings.MONITORING_TOKEN)
            or (user.is_authenticated and user.is_hosting_staff)):
        return _unauthorised()
    body = exposition(broker_url=settings.CELERY_BROKER_URL,
                      queues=[settings.CELERY_TASK_DEFAULT_QUEUE, settings.CELERY_SWEEP_QUEUE])
    return HttpResponse(body, content_type=CONTENT_TYPE)
