"""The catalog as plain data: GPU specs, server SKUs, options and prices.

Built from the database or from the seed JSON by ``portal.sizing.catalog_data``; this module
only defines the shapes and checks them. Prices are USD as Decimal (a number given is read as
written: 23.6 is 23.60), sizes carry their unit in the name.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from portal.catalog.capabilities import (
    data_parallel_problems,
    model_family_problems,
    package_problems,
)
from portal.catalog.pricing import to_decimal

INTERCONNECTS = ("pcie", "nvlink-bridge", "nvswitch")


def _exact_prices(spec, *names: str) -> None:
    for name in names:
        object.__setattr__(spec, name, to_decimal(getattr(spec, name)))

NETWORK_KINDS = ("ethernet", "infiniband")
RAID_LEVELS = ("single", "raid0", "raid10")


@dataclass(frozen=True)
class GpuSpec:
    slug: str
    name: str
    memory_bytes: int  # vendor GB = 1e9 bytes
    bf16_tflops: float  # dense tensor TFLOPS
    fp8_tflops: float | None = None
    fp32_tflops: float = 0.0
    memory_bandwidth_gbytes_per_s: float = 0.0
    nvlink_gbytes_per_s: float | None = None  # per GPU, bidirectional (datasheet figure)
    pcie_gen: int = 4

    def __post_init__(self) -> None:
        if self.memory_bytes <= 0 or self.bf16_tflops <= 0:
            raise ValueError(f"GPU {self.slug!r}: memory_bytes and bf16_tflops must be positive")
        if self.pcie_gen not in (3, 4, 5):
            raise ValueError(f"GPU {self.slug!r}: pcie_gen must be 3, 4 or 5, got {self.pcie_gen}")

    @property
    def memory_gb(self) -> float:
        return self.memory_bytes / 1e9


@dataclass(frozen=True)
class SkuSpec:
    slug: str
    name: str
    gpu_slug: str
    gpus_per_node: int
    interconnect: str  # pcie | nvlink-bridge | nvswitch
    price_hourly_usd: Decimal
    cpu_cores: int = 0
    ram_bytes: int = 0
    price_monthly_usd: Decimal = Decimal("0")
    stock_nodes: int | None = None  # ready nodes in inventory; None: unknown (no inventory)

    def __post_init__(self) -> None:
        _exact_prices(self, "price_hourly_usd", "price_monthly_usd")
        if self.gpus_per_node not in (1, 2, 4, 8):
            raise ValueError(f"SKU {self.slug!r}: gpus_per_node must be 1, 2, 4 or 8")
        if self.interconnect not in INTERCONNECTS:
            raise ValueError(f"SKU {self.slug!r}: interconnect must be one of {INTERCONNECTS}")
        if self.price_hourly_usd <= 0:
            raise ValueError(f"SKU {self.slug!r}: price_hourly_usd must be positive")


@dataclass(frozen=True)
class NvmeOptionSpec:
    slug: str
    size_tb: float
    drives: int
    raid: str
    price_monthly_usd: Decimal

    def __post_init__(self) -> None:
        _exact_prices(self, "price_monthly_usd")
        if self.raid not in RAID_LEVELS:
            raise ValueError(f"NVMe option {self.slug!r}: raid must be one of {RAID_LEVELS}")


@dataclass(frozen=True)
class NetworkOptionSpec:
    slug: str
    name: str
    kind: str  # ethernet | infiniband
    speed_gbit_per_s: float  # per node (one port, shared by the node's GPUs)
    price_monthly_usd: Decimal
    on_request: bool = False
    is_default: bool = False

    def __post_init__(self) -> None:
        _exact_prices(self, "price_monthly_usd")
        if self.kind not in NETWORK_KINDS:
            raise ValueError(f"network option {self.slug!r}: kind must be one of {NETWORK_KINDS}")
        if self.speed_gbit_per_s <= 0:
            raise ValueError(f"network option {self.slug!r}: speed must be positive")


@dataclass(frozen=True)
class StorageProviderSpec:
    slug: str
    name: str
    kind: str  # minio | wasabi | b2 | aws | custom
    price_per_tb_monthly_usd: Decimal

    def __post_init__(self) -> None:
        _exact_prices(self, "price_per_tb_monthly_usd")


@dataclass(frozen=True)
class StackOptionSpec:
    """A catalog stack option; for kind "strategy", what it can run (portal/catalog/capabilities.py)."""

    slug: str
    name: str
    kind: str  # strategy | tracker
    data_parallel: tuple[str, ...] = ()
    tensor_parallel: bool = False
    sequence_parallel: bool = False
    pipeline_parallel: bool = False
    context_parallel: bool = False
    cpu_offload: bool = False
    lora: bool = False
    qlora: bool = False
    fp8: bool = False
    op_level_checkpointing: bool = False
    model_families: tuple[str, ...] = ()  # MODEL_FAMILIES keys: the architectures it builds
    packages: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        problems = (data_parallel_problems(list(self.data_parallel))
                    + model_family_problems(list(self.model_families))
                    + package_problems(list(self.packages)))
        if problems:
            raise ValueError(f"stack option {self.slug!r}: {'; '.join(problems)}")


@dataclass(frozen=True)
class CatalogData:
    gpus: tuple[GpuSpec, ...]
    skus: tuple[SkuSpec, ...]
    nvme: tuple[NvmeOptionSpec, ...] = ()
    networks: tuple[NetworkOptionSpec, ...] = ()
    storage: tuple[StorageProviderSpec, ...] = ()
    stack: tuple[StackOptionSpec, ...] = ()
    checkpoints_kept: int = 3  # full training states a bucket keeps (STORAGE_KEEP_VERSIONS)

    def __post_init__(self) -> None:
        if self.checkpoints_kept < 1:
            raise ValueError("checkpoints_kept must be at least 1")
        if not self.skus:
            raise ValueError("the catalog has no active server SKUs; seed it (manage.py seed_catalog)")
        slugs = {g.slug for g in self.gpus}
        for sku in self.skus:
            if sku.gpu_slug not in slugs:
                raise ValueError(f"SKU {sku.slug!r} names GPU {sku.gpu_slug!r}, which the catalog lacks")

    def gpu(self, slug: str) -> GpuSpec:
        for g in self.gpus:
            if g.slug == slug:
                return g
        raise ValueError(f"unknown GPU {slug!r}")

    def sku(self, slug: str) -> SkuSpec:
        for s in self.skus:
            if s.slug == slug:
                return s
        raise ValueError(f"unknown SKU {slug!r}; choose one of: {', '.join(s.slug for s in self.skus)}")

    def network(self, slug: str) -> NetworkOptionSpec:
        for n in self.networks:
            if n.slug == slug:
                return n
        raise ValueError(f"unknown network option {slug!r}")
