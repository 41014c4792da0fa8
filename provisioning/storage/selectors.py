"""Reads for pages and the API: what a customer may see of an order's storage (never a secret)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from provisioning.storage.models import Bucket


@dataclass(frozen=True)
class StorageView:
    bucket: str
    endpoint: str
    region: str
    provider: str  # display name
    state: str
    retain_until: datetime | None
    access_key_id: str  # "" when no active key
    secret_revealable: bool  # the active key's secret has not been shown yet


def storage_for(order) -> StorageView | None:
    bucket = (Bucket.objects.filter(order=order).select_related("provider")
              .prefetch_related("credentials").first())
    if bucket is None:
        return None
    active = next((c for c in bucket.credentials.all() if c.active), None)
    return StorageView(bucket=bucket.name, endpoint=bucket.endpoint, region=bucket.region,
                       provider=bucket.provider.name, state=bucket.state,
                       retain_until=bucket.retain_until,
                       access_key_id=active.access_key_id if active else "",
                       secret_revealable=bool(active and active.revealed_at is None))
