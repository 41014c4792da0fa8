"""What answers under /api/ when no endpoint does: a 404 problem, never the HTML debug page."""

from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView


class ApiNotFound(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []
    schema = None  # not an endpoint: left out of the OpenAPI schema

    def _not_found(self, request, *args, **kwargs):
        raise NotFound(f"No endpoint at {request.path}; see /api/docs/ for the endpoints.")

    get = post = put = patch = delete = head = options = _not_found
