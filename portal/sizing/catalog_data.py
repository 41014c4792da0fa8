"""Builds the recommender's pure CatalogData from the seed JSON or from catalog rows.

`catalog_from_seed()` needs no database and no Django set-up (tests, bench); the catalog as the
database holds it, cached and priced per organisation, is `portal.sizing.catalog_live`'s.
"""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings

from portal.catalog.capabilities import FEATURES
from portal.catalog.pricing import PriceList, to_decimal
from portal.sizing.recommend.catalog import (
    CatalogData,
    GpuSpec,
    NetworkOptionSpec,
    NvmeOptionSpec,
    SkuSpec,
    StackOptionSpec,
    StorageProviderSpec,
)

SEED_PATH = Path(__file__).resolve().parent.parent / "catalog" / "data" / "catalog.json"


def _f(value: Any) -> float:
    return float(value) if value is not None else 0.0


def _usd(value: Any) -> Decimal:
    return to_decimal(value) if value is not None else Decimal("0")


def _gpu(row: dict) -> GpuSpec:
    return GpuSpec(
        slug=row["slug"], name=row["name"], memory_bytes=int(_f(row["memory_gb"]) * 10**9),
        bf16_tflops=_f(row["bf16_tflops"]), fp8_tflops=_f(row["fp8_tflops"]) or None,
        fp32_tflops=_f(row["fp32_tflops"]), memory_bandwidth_gbytes_per_s=_f(row["memory_bandwidth_gbps"]),
        nvlink_gbytes_per_s=_f(row["nvlink_gbps"]) or None, pcie_gen=int(row["pcie_gen"]),
    )


def _sku(row: dict, gpu_slug: str, stock: int | None = None) -> SkuSpec:
    return SkuSpec(
        slug=row["slug"], name=row["name"], gpu_slug=gpu_slug, gpus_per_node=int(row["gpu_count"]),
        interconnect=row["interconnect"], price_hourly_usd=_usd(row["price_hourly"]),
        cpu_cores=int(row.get("cpu_cores") or 0), ram_bytes=int(_f(row.get("ram_gb")) * 10**9),
        price_monthly_usd=_usd(row.get("price_monthly")), stock_nodes=stock,
    )


def _options(data: dict) -> dict[str, tuple]:
    return {
        "nvme": tuple(NvmeOptionSpec(r["slug"], _f(r["size_tb"]), int(r["drives"]), r["raid"],
                                     _usd(r["price_monthly"])) for r in data["nvme"]),
        "networks": tuple(NetworkOptionSpec(r["slug"], r["name"], r["kind"], _f(r["speed_gbps"]),
                                            _usd(r["price_monthly"]), bool(r.get("on_request")),
                                            bool(r.get("is_default"))) for r in data["network"]),
        "storage": tuple(StorageProviderSpec(r["slug"], r["name"], r["kind"], _usd(r["price_per_tb_monthly"]))
                         for r in data["storage"]),
        "stack": tuple(_stack(r) for r in data["stack"]),
    }


def _stack(row: dict) -> StackOptionSpec:
    """A stack option with its capabilities (a row without them, e.g. a tracker, declares none)."""
    features = {name: bool(row.get(name, False)) for name in FEATURES}
    return StackOptionSpec(row["slug"], row["name"], row["kind"],
                           data_parallel=tuple(row.get("data_parallel") or ()),
                           model_families=tuple(row.get("model_families") or ()),
                           packages=tuple(row.get("packages") or ()),
                           description=row.get("description") or "", **features)


def catalog_from_dict(data: dict) -> CatalogData:
    """From the seed format (portal/catalog/data/catalog.json)."""
    try:
        gpus = tuple(_gpu(r) for r in data["gpus"])
        skus = tuple(_sku(r, r["gpu"]) for r in data["skus"] if r.get("is_active", True))
        return CatalogData(gpus=gpus, skus=skus, **_options(data))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"catalog data is missing or malformed: {exc}") from exc


def catalog_from_seed(path: Path | str = SEED_PATH) -> CatalogData:
    with open(path, encoding="utf-8") as fh:
        return catalog_from_dict(json.load(fh))


def catalog_from_rows(rows, *, stock: dict[str, int] | None = None) -> CatalogData:
    """From ``portal.catalog.cache.CatalogRows``; ``stock``: ready nodes per SKU slug."""
    def row(obj, *fields):
        return {f: getattr(obj, f) for f in fields}

    gpus = tuple(_gpu(row(g, "slug", "name", "memory_gb", "bf16_tflops", "fp8_tflops", "fp32_tflops",
                          "memory_bandwidth_gbps", "nvlink_gbps", "pcie_gen"))
                 for g in rows.gpus)
    skus = tuple(
        _sku(row(s, "slug", "name", "gpu_count", "interconnect", "price_hourly", "cpu_cores", "ram_gb",
                 "price_monthly"), s.gpu.slug, None if stock is None else stock.get(s.slug, 0))
        for s in rows.skus
    )
    data = {
        "nvme": [row(o, "slug", "size_tb", "drives", "raid", "price_monthly") for o in rows.nvme],
        "network": [row(o, "slug", "name", "kind", "speed_gbps", "price_monthly", "on_request", "is_default")
                    for o in rows.networks],
        "storage": [row(o, "slug", "name", "kind", "price_per_tb_monthly") for o in rows.storage],
        "stack": [row(o, "slug", "name", "kind", "data_parallel", "model_families", "packages",
                      "description", *FEATURES)
                  for o in rows.stack],
    }
    return CatalogData(gpus=gpus, skus=skus, **_options(data),
                       checkpoints_kept=settings.STORAGE_KEEP_VERSIONS)


def catalog_priced(data: CatalogData, price_list: PriceList) -> CatalogData:
    """Every unit price as ``price_list`` charges it (the recommender then prices plans with
    the same numbers the configurator multiplies)."""
    def unit(kind: str, slug: str, amount: Decimal) -> Decimal:
        return price_list.unit(f"{kind}:{slug}", amount)

    return replace(
        data,
        skus=tuple(replace(s, price_hourly_usd=unit("sku", s.slug, s.price_hourly_usd),
                           price_monthly_usd=unit("sku", s.slug, s.price_monthly_usd)) for s in data.skus),
        nvme=tuple(replace(o, price_monthly_usd=unit("nvme", o.slug, o.price_monthly_usd))
                   for o in data.nvme),
        networks=tuple(replace(o, price_monthly_usd=unit("network", o.slug, o.price_monthly_usd))
                       for o in data.networks),
        storage=tuple(replace(o, price_per_tb_monthly_usd=unit("storage", o.slug, o.price_per_tb_monthly_usd))
                      for o in data.storage))
