"""Times every request into ``trainyard_http_request_duration_seconds`` by view (the URL pattern's
name, never the path: one series per view, whatever the references in URLs)."""

from __future__ import annotations

import time

from portal.core.metrics import REQUEST_SECONDS


class RequestMetricsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = (match.view_name or match._func_path) if match else "unmatched"
        REQUEST_SECONDS.labels(view=view, method=request.method if request.method in _METHODS else "other",
                               status=f"{response.status_code // 100}xx").observe(
            time.perf_counter() - started)
        return response


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
