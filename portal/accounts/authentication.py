from rest_framework import authentication, exceptions

from portal.accounts.services import api_key_authenticate


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Api-Key ty_<prefix>_<secret>`; the request acts for the key's organisation."""

    keyword = "Api-Key"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header.startswith(self.keyword + " "):
            return None
        key = api_key_authenticate(header[len(self.keyword) + 1:].strip())
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return (ApiKeyUser(key), key)

    def authenticate_header(self, request):
        return self.keyword


class ApiKeyUser:
    """The principal of an API request: an organisation, not a person."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_hosting_staff = False
    is_approver = False
    is_operator = False
    is_superuser = False
    is_staff = False

    def __init__(self, api_key):
        self.api_key = api_key
        self.organisation = api_key.organisation
        self.pk = None

    def __str__(self) -> str:
        return f"api-key:{self.api_key.prefix}"
