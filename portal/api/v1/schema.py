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
_UNSAFE = {"409": "The object's state does not allow this, or a slug or key is already taken (`errors`)."}
_WITH_BODY = {"415": "The body is not JSON."}
_IDEMPOTENT = {"422": "An `Idempotency-Key` reused with another body."}
_HEADERS = {
    "401": {"WWW-Authenticate": {"schema": {"type": "string"}}},
    "429": {"Retry-After": {"schema": {"type": "integer"}}},
}


# What portal.core.middleware and the JSON parser refuse anywhere in a request (a 400).
CONTROLS = "\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f"
NO_CONTROLS = f"^[^{CONTROLS}]*$"
PATH_SEGMENT = f"^[^/{CONTROLS}]+$"
NOT_EMPTIABLE = {"limit", "state"}  # `?limit=`, `?state=` are a 400; any other empty value is left out


def _plain_string(schema: dict) -> bool:
    return schema.get("type") == "string" and not {"pattern", "enum", "format"} & schema.keys()


def _no_controls(schema, seen: set) -> None:
    """Every plain string of a request body states that it holds no control character."""
    if not isinstance(schema, dict) or id(schema) in seen:
        return
    seen.add(id(schema))
    if _plain_string(schema):
        schema["pattern"] = NO_CONTROLS
    for key in ("properties",):
        for child in schema.get(key, {}).values():
            _no_controls(child, seen)
    for key in ("items", "additionalProperties"):
        _no_controls(schema.get(key), seen)
    for key in ("allOf", "anyOf", "oneOf"):
        for child in schema.get(key, []):
            _no_controls(child, seen)


def request_strings(result, generator, request, public):
    """Postprocessing hook: the schema says what the API does with the text of a request. A query
    parameter sent empty is the same as one left out (DRF reads `?month=` as no month), so every
    optional one but `limit` and `state` allows the empty value; no parameter or body string may
    hold a control character (tab and line breaks aside in a body): the API refuses those (400)."""
    seen: set = set()
    for name, schema in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request"):
            _no_controls(schema, seen)
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for content in operation.get("requestBody", {}).get("content", {}).values():
                _no_controls(content.get("schema"), seen)
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                if parameter["in"] == "query" and not parameter.get("required") \
                        and parameter["name"] not in NOT_EMPTIABLE:
                    parameter["allowEmptyValue"] = True
                if _plain_string(schema):
                    schema["pattern"] = PATH_SEGMENT if parameter["in"] == "path" else NO_CONTROLS
    return result


PLAN_ALONE = ("training", "parallel", "gpu", "sku", "network", "train_tokens")


def one_model_source(result, generator, request, public):
    """Postprocessing hook: a sizing request names its model one way, a preset or a non-empty
    hf_config (ModelInputMixin), and an estimate may instead send a stored plan alone."""
    schemas = result.get("components", {}).get("schemas", {})
    for name, sources in (("RecommendationInputRequest", ["model", "hf_config"]),
                          ("EstimateInputRequest", ["model", "hf_config", "plan"])):
        if name not in schemas:
            continue
        schema = schemas[name]
        schema["properties"]["hf_config"]["minProperties"] = 1
        schema["oneOf"] = [{"required": [source]} for source in sources]
        if "plan" in sources:
            schema["allOf"] = [{"not": {"required": ["plan", other]}} for other in PLAN_ALONE]
    return result


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
