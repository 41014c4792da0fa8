from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from portal.accounts.principals import ApiKeyPrincipal


class PerKeyRateThrottle(SimpleRateThrottle):
    """Requests per API key (per person for a session, per address without credentials); the
    rate is `API_RATE_LIMIT`, e.g. `600/min`. Over it: 429 with `Retry-After`."""

    scope = "api"

    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)  # read now: settings may change

    def get_cache_key(self, request, view):
        user = request.user
        if isinstance(user, ApiKeyPrincipal):
            ident = f"key-{user.api_key.prefix}"
        elif user is not None and user.is_authenticated:
            ident = f"user-{user.pk}"
        else:
            ident = f"ip-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
