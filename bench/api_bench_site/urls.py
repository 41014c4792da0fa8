"""Every portal URL, plus GET /api/v1/bench-trivial: the baseline of bench/api_bench.py."""

from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.urls import handler500  # noqa: F401
from portal.urls import urlpatterns as portal_urlpatterns


class Trivial(APIView):
    """What any API request costs here and nothing more: the same authentication (the API key),
    permissions, throttle, renderer and middleware as every endpoint; no query of its own."""

    schema = None

    def get(self, request):
        return Response({"ok": True})


urlpatterns = [path("api/v1/bench-trivial", Trivial.as_view()), *portal_urlpatterns]
