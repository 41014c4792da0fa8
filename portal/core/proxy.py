"""The client's address: REMOTE_ADDR, or the address a trusted proxy appended (TRUSTED_PROXY)."""

from django.conf import settings


def client_ip(request) -> str | None:
    if settings.TRUSTED_PROXY:
        hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        if hops[-1]:
            return hops[-1][:64]  # the proxy's own entry; earlier ones are what the client claimed
    return request.META.get("REMOTE_ADDR")
