"""What the customer configures: a server SKU × nodes with its options (catalog objects)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def orders_a_bucket(provider_kind: str, storage_tb: int) -> bool:
    """Whether storage of this provider kind ("" for none) and size orders a bucket: a provider
    and a size, or the customer's own bucket (kind "custom", 0 TB)."""
    return bool(provider_kind) and (bool(storage_tb) or provider_kind == "custom")


def prices_a_bucket(provider: Any, storage_tb: int) -> bool:
    """Whether the price has a storage line: a provider (any reference to one; None or "" for
    none) and a size (the customer's own bucket, 0 TB, costs nothing)."""
    return bool(provider) and bool(storage_tb)


@dataclass(frozen=True)
class CustomStorage:
    """The customer's own S3 bucket (provider kind "custom"): kept encrypted on quote and order."""

    endpoint_url: str = ""
    bucket: str = ""
    access_key_id: str = ""
    secret_key: str = field(default="", repr=False)

    @property
    def complete(self) -> bool:
        return bool(self.endpoint_url and self.bucket and self.access_key_id and self.secret_key)


@dataclass(frozen=True)
class Configuration:
    """Holds catalog objects (anything with the catalog models' attributes: `price_hourly`,
    `price_monthly`, `speed_gbps`, …), so the same rules price a form, an API request and a quote."""

    sku: Any
    nvme: Any
    network: Any
    node_count: int = 1
    storage_provider: Any = None
    storage_tb: int = 0
    strategy: Any = None
    tracker: Any = None
    storage_retention_days: int | None = None  # None: settings.STORAGE_RETENTION_DAYS
    custom_storage: CustomStorage | None = None

    @property
    def storage_kind(self) -> str:
        return getattr(self.storage_provider, "kind", "") if self.storage_provider is not None else ""

    @property
    def has_object_storage(self) -> bool:
        return orders_a_bucket(self.storage_kind, self.storage_tb)

    @property
    def has_priced_storage(self) -> bool:
        return prices_a_bucket(self.storage_provider, self.storage_tb)
