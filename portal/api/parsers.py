"""JSON bodies only, bounded in size and nesting: a huge or deeply nested body is a 400 problem,
never a worker busy for seconds or a RecursionError (500). Control characters (NUL …) in a key or
a string are a 400 too, as in a form (portal.core.middleware): PostgreSQL cannot even compare
text holding a NUL, so a lookup by such a slug answered 500. Invisible and direction-changing
characters (portal.core.text) in any string are a 400 naming the field, as a form's text field
refuses them: no name, description or note of the API stores them."""

from __future__ import annotations

import codecs
import json

from django.conf import settings
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

from portal.core.middleware import CONTROL_CHARACTERS
from portal.core.middleware import MESSAGE as CONTROL_MESSAGE
from portal.core.text import hidden_text_problem

MAX_DEPTH = 32  # our deepest request (a plan with its model spec) nests 4 levels


def _strict_constant(value):
    raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        limit = settings.API_MAX_BODY_BYTES
        request = parser_context.get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and declared.isdigit() and int(declared) > limit:
            raise ParseError(f"The body has {int(declared):,} bytes; at most {limit:,} are accepted.")
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise ParseError(f"The body has more than {limit:,} bytes; at most {limit:,} are accepted.")
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.decode(raw, encoding)
            data = json.loads(text, parse_constant=_strict_constant)
        except RecursionError:
            raise ParseError(f"JSON nested deeper than {MAX_DEPTH} levels.") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        depth, junk = _walk(data)
        if depth > MAX_DEPTH:
            raise ParseError(f"JSON nested deeper than {MAX_DEPTH} levels.")
        if junk:
            raise ParseError(CONTROL_MESSAGE)
        if hidden := _hidden_text(data):
            path, problem = hidden
            raise ValidationError(_nested(path, problem))
        return data


def _hidden_text(value, path: tuple = ()) -> tuple[tuple, str] | None:
    """(where, why) of the first key or string with invisible or direction-changing characters
    (tab and line breaks allowed: a serializer decides where those go); None when there is none.
    Depth is bounded by MAX_DEPTH already."""
    if isinstance(value, str):
        problem = hidden_text_problem(value, multiline=True)
        return (path or ("non_field_errors",), problem) if problem else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        if isinstance(key, str) and (problem := hidden_text_problem(key, multiline=True)):
            return (*path, key), problem
        if found := _hidden_text(child, (*path, str(key))):
            return found
    return None


def _nested(path: tuple, problem: str) -> dict:
    """{"storage_custom": {"bucket": [problem]}} for the path ("storage_custom", "bucket")."""
    errors: dict | list = [problem]
    for part in reversed(path):
        errors = {part: errors}
    return errors


def _walk(value) -> tuple[int, bool]:
    """(nesting depth, whether a key or string holds a control character)."""
    deepest, junk, stack = 0, False, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            junk = junk or bool(CONTROL_CHARACTERS.search(item))
        elif isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest, junk
            if isinstance(item, dict):
                junk = junk or any(CONTROL_CHARACTERS.search(k) for k in item)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest, junk
