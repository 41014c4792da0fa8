"""Text people type that others read: names of organisations, keys, nodes and webhook endpoints,
reasons and notes. One rule: no invisible or direction-changing characters.

Unicode format characters (category Cf: the bidirectional overrides and isolates U+202A–U+202E
and U+2066–U+2069, the marks U+200E/U+200F, zero-width U+200B–U+200D, U+2060, U+FEFF, …), other
control characters (Cc), private-use and surrogate characters and line/paragraph separators can
make a name on a staff page read as something else ("invoice" + U+202E + "fdp.exe" shows as
"invoiceexe.pdf"). They are refused with a message that names them, never stored. Single-line
text refuses tabs and line breaks too.

Where it applies: every form people fill in (``VisibleTextMixin`` in ``portal.core.forms``) and
every string of an API body (``portal.api.parsers``)."""

from __future__ import annotations

import unicodedata

from django.core.exceptions import ValidationError
from django.utils.deconstruct import deconstructible

HIDDEN_CATEGORIES = frozenset({"Cf", "Cc", "Co", "Cs", "Zl", "Zp"})
LINE_BREAKS = frozenset("\n\r\t")


def hidden_characters(text: str, *, multiline: bool = False) -> list[str]:
    """The invisible or direction-changing characters in ``text``, as ``U+202E RIGHT-TO-LEFT
    OVERRIDE`` (each once, in order); tab and line breaks count only when not ``multiline``."""
    found: list[str] = []
    for char in dict.fromkeys(text or ""):
        if multiline and char in LINE_BREAKS:
            continue
        if unicodedata.category(char) in HIDDEN_CATEGORIES:
            name = unicodedata.name(char, "") or {"\t": "TAB", "\n": "LINE FEED",
                                                   "\r": "CARRIAGE RETURN"}.get(char, "CONTROL")
            found.append(f"U+{ord(char):04X} {name}")
    return found


def hidden_text_problem(text: str, *, multiline: bool = False) -> str:
    """Why ``text`` is refused ("" when it is fine): a sentence naming the characters."""
    found = hidden_characters(text, multiline=multiline)
    if not found:
        return ""
    listed = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return (f"Remove the invisible or direction-changing characters ({listed}): they can make "
            f"text read as something it is not.")


@deconstructible
class VisibleText:
    """A Django validator: ``hidden_text_problem`` as a ValidationError."""

    code = "hidden_characters"

    def __init__(self, *, multiline: bool = False):
        self.multiline = multiline

    def __call__(self, value) -> None:
        problem = hidden_text_problem(str(value), multiline=self.multiline)
        if problem:
            raise ValidationError(problem, code=self.code)

    def __eq__(self, other) -> bool:
        return isinstance(other, VisibleText) and other.multiline == self.multiline
