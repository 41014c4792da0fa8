"""OpenAPI description of the API-key authentication (registered on import)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "portal.accounts.authentication.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Api-Key ty_<prefix>_<secret>`; the request acts for the key's organisation."}



class SelfRotationReplayScheme(OpenApiAuthenticationExtension):
    """Not a scheme of its own: the rotate endpoint's API key, also accepted just revoked for
    the replay of its own rotation (docs/api.md)."""

    target_class = "portal.api.authentication.SelfRotationReplayAuthentication"
    name: list = []

    def get_security_requirement(self, auto_schema):
        return None

    def get_security_definition(self, auto_schema):
        return []


PROBLEM = {
    "type": "object",
    "description": "An error, RFC 9457 (`application/problem+json`).",
    "properties": {
        "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
        "detail": {"type": "string"}, "code": {"type": "string"}, "instance": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": True,
                   "description": "By field, on a validation error (400)."},
        "retry_after_seconds": {"type": "integer", "description": "On 429."},
    },
    "required": ["type", "title", "status", "detail"],
}
_ALWAYS = {
    "400": "Invalid input (`errors` by field), or malformed, oversized or too deeply nested JSON.",
    "401": "No key, or an invalid or revoked one.",
    "403": "The key may not do this (e.g. a read-only key writing).",
    "404": "No such object among your organisations' (another tenant's is a 404 too), or a bad cursor.",
    "429": "Over the per-key rate; wait `Retry-After` seconds.",
}
_UNSAFE = {"409": "The object's state does not allow this."}
_WITH_BODY = {"415": "The body is not JSON."}
_IDEMPOTENT = {"422": "An `Idempotency-Key` reused with another body."}
_HEADERS = {
    "401": {"WWW-Authenticate": {"schema": {"type": "string"}}},
    "429": {"Retry-After": {"schema": {"type": "integer"}}},
}


def problem_responses(result, generator, request, public):
    """Postprocessing hook: every operation documents the problem+json errors it can answer, so
    clients (and schemathesis) see them in the schema."""
    result.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            errors = dict(_ALWAYS)
            if method in ("post", "put", "patch", "delete"):
                errors |= _UNSAFE
            if "requestBody" in operation:
                errors |= _WITH_BODY
            if any(p.get("name") == "Idempotency-Key" for p in operation.get("parameters", [])):
                errors |= _IDEMPOTENT
            responses = operation.setdefault("responses", {})
            for status, description in errors.items():
                response = {"description": description, "content": {"application/problem+json": {
                    "schema": {"$ref": "#/components/schemas/Problem"}}}}
                if status in _HEADERS:
                    response["headers"] = _HEADERS[status]
                responses.setdefault(status, response)
    return result
