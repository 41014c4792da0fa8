"""The rotate endpoint's extra authentication, tried before the usual API key: a key that just
rotated itself, retrying that rotation (``portal.api.idempotency.self_rotation_replay``). For
anything else it steps aside and ApiKeyAuthentication answers (a revoked key: 401)."""

from rest_framework import authentication

from portal.accounts.authentication import ApiKeyAuthentication
from portal.api.idempotency import self_rotation_replay


class SelfRotationReplayAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode(errors="replace")
        scheme, _, credentials = header.partition(" ")
        if scheme.lower() not in {"api-key", "bearer"}:
            return None
        principal = self_rotation_replay(request, credentials.strip())
        return None if principal is None else (principal, principal.api_key)

    def authenticate_header(self, request):
        return ApiKeyAuthentication().authenticate_header(request)  # a refusal stays a 401
