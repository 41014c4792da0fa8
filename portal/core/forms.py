"""What every form people fill in shares."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from portal.core.text import VisibleText


class VisibleTextMixin:
    """Put first in a form's bases: each of its text fields refuses invisible and
    direction-changing characters (``portal.core.text``); one-line fields also tabs and line
    breaks. Password fields are left alone (nobody reads them)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            if isinstance(field, forms.CharField) and not isinstance(field.widget, forms.PasswordInput):
                field.validators.append(VisibleText(multiline=isinstance(field.widget, forms.Textarea)))


def add_service_errors(form, exc: ValidationError) -> None:
    """A service's ValidationError shown on the form: each message on its field (by name), the
    rest above the form."""
    for name, errors in exc.message_dict.items():
        for error in errors:
            form.add_error(name if name in form.fields else None, error)
