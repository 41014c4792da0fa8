"""Bearer tokens of the machines that call the portal: Prometheus (scrape targets, /metrics) and
Alertmanager (alerts). An empty setting refuses every token."""

from __future__ import annotations

import hmac


def bearer_matches(request, secret: str) -> bool:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if not secret or scheme.lower() != "bearer" or not token:
        return False
    return hmac.compare_digest(token.strip().encode(), secret.encode())
