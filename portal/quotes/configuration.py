"""What the customer configures: a server SKU × nodes with its options (catalog objects)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
