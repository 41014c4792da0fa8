"""JSON bodies only, bounded in size and nesting: a huge or deeply nested body is a 400 problem,
never a worker busy for seconds or a RecursionError (500)."""

from __future__ import annotations

import codecs
import json

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

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
        if _depth(data) > MAX_DEPTH:
            raise ParseError(f"JSON nested deeper than {MAX_DEPTH} levels.")
        return data


def _depth(value) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest
