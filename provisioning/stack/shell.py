"""The shell scripts the pipeline runs on nodes, kept as ``.sh`` files in ``sh/`` (checked by
shellcheck in the tests). They take their inputs from the environment the pipeline passes
(``TRAINYARD_*``), never from text pasted into them; a script may start with shared functions
from ``sh/lib/``."""

from __future__ import annotations

from functools import cache
from pathlib import Path

SH_DIR = Path(__file__).with_name("sh")


@cache
def node_script(name: str, *, libs: tuple[str, ...] = ()) -> str:
    """``sh/<name>.sh`` with the functions of ``sh/lib/<lib>.sh`` inserted after its header
    (the lines up to the first blank line)."""
    script = (SH_DIR / f"{name}.sh").read_text(encoding="utf-8")
    if not libs:
        return script
    header, _, body = script.partition("\n\n")
    functions = "".join(lib_function(lib) for lib in libs)
    return f"{header}\n\n{functions}\n{body}"


@cache
def lib_function(name: str) -> str:
    """A shared function from ``sh/lib/<name>.sh`` (its shebang and leading comments dropped)."""
    lines = (SH_DIR / "lib" / f"{name}.sh").read_text(encoding="utf-8").splitlines(keepends=True)
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    return "".join(lines)
