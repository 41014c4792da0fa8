"""`Trainyard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` (pure).

A receiver recomputes the HMAC with its endpoint's secret over the timestamp, a dot and the raw
body bytes, compares in constant time and rejects timestamps older than a few minutes (replay)."""

from __future__ import annotations

import hashlib
import hmac

HEADER = "Trainyard-Signature"
DEFAULT_TOLERANCE_S = 300


def signature(secret: str, timestamp: int, body: bytes) -> str:
    signed = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    return f"t={timestamp},v1={signature(secret, timestamp, body)}"


def verify(secret: str, header: str, body: bytes, *, now: int,
           tolerance_s: int = DEFAULT_TOLERANCE_S) -> bool:
    """True when ``header`` signs ``body`` with ``secret`` within ``tolerance_s`` of ``now``."""
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance_s:
        return False
    return hmac.compare_digest(parts.get("v1", ""), signature(secret, timestamp, body))
