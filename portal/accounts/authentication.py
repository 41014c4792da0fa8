from rest_framework import authentication, exceptions

from portal.accounts.principals import ApiKeyPrincipal
from portal.accounts.services import api_key_authenticate


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Api-Key ty_<prefix>_<secret>` (or `Bearer ty_…`); the request acts for
    the key's organisation (a reseller's also for its customers)."""

    keyword = "Api-Key"
    aliases = ("Api-Key", "Bearer")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode(errors="replace")
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() not in {a.lower() for a in self.aliases}:
            return None
        credentials = credentials.strip()
        if scheme.lower() == "bearer" and not credentials.startswith("ty_"):
            return None  # someone else's bearer token: not ours to refuse
        key = api_key_authenticate(credentials)
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return (ApiKeyPrincipal(key), key)

    def authenticate_header(self, request):
        return f'{self.keyword} realm="api"'
