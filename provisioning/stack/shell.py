"""The shell scripts the pipeline runs on nodes, kept as ``.sh`` files in ``sh/`` (checked by
shellcheck in the tests). They take their inputs from the environment the pipeline passes
(``TRAINYARD_*``) or, for a file that must carry its inputs (a rendered stack file, a script
whose callers pass no environment), from a header of ``TRAINYARD_*=value`` lines written above
the script's body (``assignments``); never from text pasted into them. A script may start with
shared functions from ``sh/lib/``."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from functools import cache
from pathlib import Path

SH_DIR = Path(__file__).with_name("sh")
_NAME = re.compile(r"^TRAINYARD_[A-Z0-9_]+$")


def node_script(name: str, *, libs: tuple[str, ...] = (),
                values: Mapping[str, object] | None = None) -> str:
    """``sh/<name>.sh`` with ``values`` as ``NAME=value`` lines and the functions of
    ``sh/lib/<lib>.sh`` inserted after its header (the lines up to the first blank line)."""
    script = _source(name)
    if not libs and not values:
        return script
    header, _, body = script.partition("\n\n")
    functions = "".join(lib_function(lib) for lib in libs)
    return f"{header}\n{assignments(values or {})}\n{functions}{chr(10) if functions else ''}{body}"


def assignments(values: Mapping[str, object]) -> str:
    """One ``TRAINYARD_NAME=value`` line per value, the value shell-quoted; a tuple or list is a
    bash array, ``NAME=('a' 'b')``. Not exported: the script's own inputs, not its children's."""
    lines = []
    for name, value in values.items():
        if not _NAME.match(name):
            raise ValueError(f"{name!r} is not a TRAINYARD_* variable name")
        if isinstance(value, tuple | list):
            quoted = "(" + " ".join(shlex.quote(str(v)) for v in value) + ")"
        else:
            quoted = shlex.quote(str(value))
        if "$" in quoted or "`" in quoted:  # a value (a carried file), not an expansion
            lines.append("# shellcheck disable=SC2016\n")
        lines.append(f"{name}={quoted}\n")
    return "".join(lines)


_ASSIGNMENT = re.compile(r"^(TRAINYARD_[A-Z0-9_]+)=(?!\()(.*)$")


def header_values(script: str) -> dict[str, str]:
    """The scalar ``TRAINYARD_*`` values a script's header sets (what ``assignments`` wrote),
    for a reader that does not run the script (the simulated driver's echo lines)."""
    values = {}
    for line in script.splitlines():
        match = _ASSIGNMENT.match(line)
        if match:
            try:
                words = shlex.split(match[2])
            except ValueError:  # a multi-line value (a carried file): not echoed anyway
                continue
            values[match[1]] = words[0] if len(words) == 1 else ""
    return values


def body(name: str) -> str:
    """``sh/<name>.sh`` without its shebang and leading comments: a part of a larger script."""
    return _without_leading_comments(_source(name))


@cache
def _source(name: str) -> str:
    return (SH_DIR / f"{name}.sh").read_text(encoding="utf-8")


@cache
def lib_function(name: str) -> str:
    """A shared function from ``sh/lib/<name>.sh`` (its shebang and leading comments dropped)."""
    return _without_leading_comments((SH_DIR / "lib" / f"{name}.sh").read_text(encoding="utf-8"))


def _without_leading_comments(text: str) -> str:
    lines = text.splitlines(keepends=True)
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    return "".join(lines)
