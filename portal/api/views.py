"""What answers under /api/ when no endpoint does: a 404 problem, never the HTML debug page; and
a 500 outside DRF (a middleware) under /api/ as a problem too."""

import json

from django.http import HttpResponse
from django.views import defaults
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

from portal.api.errors import PROBLEM_CONTENT_TYPE, server_error_response


class ApiNotFound(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []
    schema = None  # not an endpoint: left out of the OpenAPI schema

    def _not_found(self, request, *args, **kwargs):
        raise NotFound(f"No endpoint at {request.path}; see /api/docs/ for the endpoints.")

    get = post = put = patch = delete = head = options = _not_found


def server_error(request, *args, **kwargs):
    """handler500: the problem+json body for /api/ paths, Django's page elsewhere."""
    if not request.path.startswith("/api/"):
        return defaults.server_error(request, *args, **kwargs)
    response = server_error_response(request.path)
    return HttpResponse(json.dumps(response.data), status=500, content_type=PROBLEM_CONTENT_TYPE)
