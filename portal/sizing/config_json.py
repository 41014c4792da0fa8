"""Reading an untrusted config.json (an upload, a Hugging Face download, an API body) safely.

``json.loads`` alone lets a hostile file cost a 500: deep nesting raises RecursionError, an
integer of 5,000 digits ValueError, ``1e999`` reads as infinity, and a shape of ``10**30``
overflows float arithmetic later in the estimator. Each of those is a ValueError here, with a
sentence the person who uploaded the file can act on.
"""

from __future__ import annotations

import json
from typing import Any

from portal.sizing.estimator.models import INT_FIELDS

MAX_DEPTH = 16  # Hugging Face configs nest 3-4 levels (text_config → rope_scaling → …)
MAX_INT_DIGITS = 20  # no architecture number needs more (2**64 has 20 digits)
MAX_SHAPE = 10**7  # vocab, widths, layers, heads, positions: the largest real models use < 10**6
MAX_PARAMS = 10**14  # 100 trillion parameters


def load_config_json(text: str) -> dict[str, Any]:
    """The config.json object in ``text``; ValueError saying what is wrong with it."""
    try:
        config = json.loads(text, parse_int=_bounded_int, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"That config.json is not valid JSON (line {exc.lineno}: {exc.msg}).") from None
    except RecursionError:
        raise ValueError(f"That config.json nests deeper than {MAX_DEPTH} levels.") from None
    if _depth(config) > MAX_DEPTH:
        raise ValueError(f"That config.json nests deeper than {MAX_DEPTH} levels.")
    if not isinstance(config, dict):
        raise ValueError("A config.json holds a JSON object ({…}); this one does not.")
    return config


def shape_problem(spec) -> str | None:
    """Why a model read from a config.json is too large to size (None: it is not)."""
    for name in INT_FIELDS:
        value = getattr(spec, name)
        if name != "params_override" and value > MAX_SHAPE:
            return f"{name} is {value:,}; the sizer takes architecture numbers up to {MAX_SHAPE:,}"
    total = spec.params.total
    if total > MAX_PARAMS:
        return f"it describes {total:.2e} parameters; the sizer handles up to {MAX_PARAMS:.0e}"
    return None


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"That config.json has a number of {len(digits)} digits; "
                         f"architecture numbers have at most {MAX_INT_DIGITS}.")
    return int(digits)


def _no_constant(name: str):
    raise ValueError(f"That config.json contains {name}; use finite numbers.")


def _depth(value) -> int:
    stack, deepest = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                break
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest
