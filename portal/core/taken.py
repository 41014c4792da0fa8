"""A name or key already in use: a field's error on a form, a 409 Conflict (with the field) on the
API, where it is the current state, not the request, that says no."""

from django.core.exceptions import ValidationError


class Taken(ValidationError):
    pass
