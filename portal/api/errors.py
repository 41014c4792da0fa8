"""One error format for /api/: `application/problem+json` (RFC 9457).

`{"type", "title", "status", "detail", "instance", "code"}`, plus `errors` (by field, as the
serializers report them) on a validation failure. Business rules that say no (`DomainError`, e.g.
cancelling an active order) and a name or key already taken (`Taken`, with `errors`) are 409;
Django's ValidationError and PermissionDenied from services become 400 and 403. Headers DRF sets
(`WWW-Authenticate` on 401, `Retry-After` on 429) stay. An unexpected error is logged as Django
logs it and answered as a 500 problem, never an HTML page."""

from __future__ import annotations

import logging
from http import HTTPStatus

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, status
from rest_framework.fields import get_error_detail
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from portal.core.states import DomainError
from portal.core.taken import Taken

PROBLEM_CONTENT_TYPE = "application/problem+json"
SERVER_ERROR_DETAIL = "Something went wrong on our side; it has been logged. Try again later."
request_logger = logging.getLogger("django.request")


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the resource."
    default_code = "conflict"


class TakenConflict(exceptions.ValidationError):
    """`errors` by field, as a 400, with the status of a conflict."""

    status_code = status.HTTP_409_CONFLICT


class Unprocessable(exceptions.APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = "The request cannot be processed."
    default_code = "unprocessable"


def problem_exception_handler(exc, context):
    if isinstance(exc, Taken):
        exc = TakenConflict(detail=get_error_detail(exc))
    elif isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(detail=get_error_detail(exc))
    elif isinstance(exc, DomainError):
        exc = Conflict(str(exc), code="conflict")
    elif isinstance(exc, RequestDataTooBig):  # Django's DATA_UPLOAD_MAX_MEMORY_SIZE, as DRF reads the body
        exc = exceptions.ParseError(f"The body is larger than the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} "
                                    "bytes accepted.")
    response = drf_exception_handler(exc, context)
    request = context.get("request")
    if response is None:
        return _server_error(exc, request)
    response.data = problem_body(exc, response.status_code, response.data,
                                 instance=request.path if request is not None else "")
    response.content_type = PROBLEM_CONTENT_TYPE
    return response


def _server_error(exc, request) -> Response:
    set_rollback()
    path = request.path if request is not None else ""
    request_logger.error("Internal Server Error: %s", path, exc_info=exc,
                         extra={"status_code": 500, "request": getattr(request, "_request", None)})
    return server_error_response(path)


def server_error_response(path: str) -> Response:
    body = {"type": "about:blank", "title": HTTPStatus(500).phrase, "status": 500,
            "detail": SERVER_ERROR_DETAIL, "code": "server_error", "instance": path}
    return Response(body, status=500, content_type=PROBLEM_CONTENT_TYPE)


def problem_body(exc, status_code: int, data, *, instance: str = "") -> dict:
    body = {"type": "about:blank", "title": HTTPStatus(status_code).phrase, "status": status_code}
    if isinstance(exc, exceptions.ValidationError):
        errors = data if isinstance(data, dict) else {"non_field_errors": data}
        code = "taken" if isinstance(exc, TakenConflict) else "invalid"
        body |= {"detail": _validation_summary(errors), "code": code, "errors": errors}
    else:
        detail = data.get("detail", "") if isinstance(data, dict) else str(data)
        codes = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
        body |= {"detail": str(detail), "code": codes if isinstance(codes, str) else "error"}
        if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
            body["retry_after_seconds"] = int(exc.wait)
    if instance:
        body["instance"] = instance
    return body


def _validation_summary(errors: dict) -> str:
    fields = _field_paths(errors)
    if not fields:
        first = errors.get("non_field_errors") or ["The request is invalid."]
        return str(first[0]) if isinstance(first, list) and first else str(first)
    return f"Invalid input in {', '.join(fields)}; see errors."


def _field_paths(errors: dict, prefix: str = "") -> list[str]:
    """The fields with errors, a nested one by its dotted path (``storage_custom.endpoint_url``)."""
    paths = []
    for name, value in errors.items():
        if name == "non_field_errors":
            if prefix:
                paths.append(prefix.rstrip("."))
            continue
        if isinstance(value, dict) and value:
            paths += _field_paths(value, f"{prefix}{name}.")
        else:
            paths.append(f"{prefix}{name}")
    return paths
