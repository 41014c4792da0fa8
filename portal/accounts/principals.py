"""The principal of an API request made with a key: an organisation acting through one key.

No DRF here, so selectors and services below the API can recognise it (``organisations_for``,
the audit of order events)."""

from __future__ import annotations


class ApiKeyPrincipal:
    """Acts for the key's organisation (and, for a reseller, its customers); not a person."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_hosting_staff = False
    is_approver = False
    is_operator = False
    is_superuser = False
    is_staff = False
    pk = None  # not a saved user: audit rows record the key instead (``api_key``)

    def __init__(self, api_key):
        self.api_key = api_key
        self.organisation = api_key.organisation

    def has_scope(self, scope: str) -> bool:
        return scope in (self.api_key.scopes or ())

    def __str__(self) -> str:
        return f"api-key:{self.api_key.prefix}"


def api_key_of(by):
    """The API key a principal acts with, or None (a person, the system)."""
    return by.api_key if isinstance(by, ApiKeyPrincipal) else None
