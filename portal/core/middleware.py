"""Input no view should ever see: NUL and other control characters in the path, the query
string or a form field.

PostgreSQL cannot store or even compare text with a NUL character (psycopg raises DataError),
so a ``%00`` in an order reference or a search box used to reach the database and answer 500.
This middleware turns such a request into a 400 before any view runs: one rule for every URL
and parameter instead of a check in each lookup. Under ``/api/`` the answer is the API's
problem+json; elsewhere the 400 page.
"""

from __future__ import annotations

import re

from django.core.exceptions import BadRequest
from django.http import JsonResponse

# C0 controls except tab, line feed and carriage return (text areas send those), and DEL.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
MESSAGE = "The request contains control characters (such as NUL) that no address or field accepts."


def junk_in(request) -> str | None:
    """Where the request carries a control character: 'path', 'query', a form field, or None."""
    if CONTROL_CHARACTERS.search(request.path):
        return "path"
    if any(CONTROL_CHARACTERS.search(k) or CONTROL_CHARACTERS.search(v)
           for k, values in request.GET.lists() for v in [k, *values]):
        return "query"
    if request.method == "POST" and request.content_type in FORM_TYPES:
        for key, values in request.POST.lists():
            if any(CONTROL_CHARACTERS.search(v) for v in [key, *values]):
                return key
    return None


class RejectControlCharactersMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        where = junk_in(request)
        if where is None:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            return JsonResponse({"type": "about:blank", "title": "Bad Request", "status": 400,
                                 "detail": MESSAGE, "code": "parse_error", "instance": request.path[:200]
                                 .encode("unicode_escape").decode()},
                                status=400, content_type="application/problem+json")
        raise BadRequest(MESSAGE)
