"""What a customer's receiver does with a delivery, written from docs/api.md's recipe (standard
library only, no Trainyard code): check the timestamp, recompute the HMAC, compare in constant time."""

import hashlib
import hmac
import time


def receiver_verifies(secret: str, signature_header: str, body: bytes, *, tolerance_s: int = 300) -> bool:
    fields = dict(part.split("=", 1) for part in signature_header.split(","))
    timestamp = fields["t"]
    if abs(time.time() - int(timestamp)) > tolerance_s:
        return False
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"])
