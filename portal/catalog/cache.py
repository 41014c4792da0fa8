"""The catalog, kept in memory per process: it changes a few times a year and is read on every
estimate, recommendation and catalog request.

Every change (a save or delete of a catalog row or price list, a bulk update, the seed) bumps
``CatalogVersion`` in its own transaction. A process reads that one number at most every
CATALOG_CACHE_CHECK_S seconds and drops what it built when it moved; a change made in this
process is seen at once. Reads never write. What is cached is built by the caller
(``catalog_cached(name, build)``), so each layer caches its own shape of the catalog; the values
are shared between requests and threads and must be treated as read-only."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TypeVar

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils.module_loading import import_string

from portal.catalog.models import (
    CatalogVersion,
    GPUModel,
    NetworkOption,
    NvmeOption,
    PriceList,
    ServerSKU,
    StackOption,
    StorageProvider,
)

T = TypeVar("T")
_lock = threading.Lock()
_state: dict = {"version": None, "checked_at": float("-inf"), "values": {}}


def catalog_version() -> int:
    return CatalogVersion.objects.filter(pk=1).values_list("version", flat=True).first() or 0


def _current_values() -> dict:
    now = time.monotonic()
    with _lock:
        if now - _state["checked_at"] < settings.CATALOG_CACHE_CHECK_S:
            return _state["values"]
    version = catalog_version()
    with _lock:
        if version != _state["version"]:
            _state["version"], _state["values"] = version, {}
        _state["checked_at"] = now
        return _state["values"]


def catalog_cached(name: Hashable, build: Callable[[], T]) -> T:
    """``build()``'s value, kept until the catalog changes."""
    values = _current_values()
    if name not in values:
        values[name] = build()  # two threads may both build once; either value is right
    return values[name]


def catalog_cache_clear() -> None:
    """Forget what this process built; the next read checks the version again."""
    with _lock:
        _state["version"], _state["checked_at"], _state["values"] = None, float("-inf"), {}


def catalog_changed(**_signal_kwargs) -> None:
    """Bumps the version (in the caller's transaction, so other processes see it exactly when
    the change commits) and clears this process's copy now and after the commit."""
    if not CatalogVersion.objects.filter(pk=1).update(version=F("version") + 1):
        CatalogVersion.objects.get_or_create(pk=1, defaults={"version": 1})
    catalog_cache_clear()
    transaction.on_commit(catalog_cache_clear)


# --- the rows themselves ---------------------------------------------------------------------
@dataclass(frozen=True)
class CatalogRows:
    """The catalog's rows as loaded once (active SKUs with their GPU; price lists with items)."""

    gpus: tuple[GPUModel, ...]
    skus: tuple[ServerSKU, ...]
    nvme: tuple[NvmeOption, ...]
    networks: tuple[NetworkOption, ...]
    storage: tuple[StorageProvider, ...]
    stack: tuple[StackOption, ...]
    price_lists: tuple[PriceList, ...]


def catalog_rows_now() -> CatalogRows:
    """The catalog rows read now (uncached): what ``catalog_rows`` keeps until the catalog changes."""
    skus = (ServerSKU.objects.filter(is_active=True).select_related("gpu")
            .order_by("gpu__bf16_tflops", "gpu__memory_gb", "gpu_count"))
    lists = PriceList.objects.select_related("organisation").prefetch_related(
        "items__sku", "items__nvme", "items__network", "items__storage")
    return CatalogRows(gpus=tuple(GPUModel.objects.all()), skus=tuple(skus),
                       nvme=tuple(NvmeOption.objects.all()), networks=tuple(NetworkOption.objects.all()),
                       storage=tuple(StorageProvider.objects.all()), stack=tuple(StackOption.objects.all()),
                       price_lists=tuple(lists))


def catalog_rows() -> CatalogRows:
    return catalog_cached("catalog.rows", catalog_rows_now)


def sku_stock() -> dict[str, int]:
    """Ready nodes per SKU slug, now (not cached: nodes change state all day); a SKU with none is
    absent. Counted by CATALOG_STOCK (inventory's), named from the cached catalog."""
    counts = import_string(settings.CATALOG_STOCK).per_sku()
    names = catalog_names()["sku"]
    if not counts.keys() <= names.keys():  # a SKU added since this process read the catalog
        catalog_cache_clear()
        names = catalog_names()["sku"]
    return {names[sku][0]: n for sku, n in counts.items() if sku in names}


def catalog_names() -> dict[str, dict[int, tuple[str, str]]]:
    """(slug, name) by primary key for every SKU (sold or not) and option: what an order or quote
    shows of its catalog rows without joining them."""
    def build():
        rows = {"sku": ServerSKU.objects.values_list("pk", "slug", "name"),
                "nvme": NvmeOption.objects.values_list("pk", "slug", "slug"),
                "network": NetworkOption.objects.values_list("pk", "slug", "name"),
                "storage": StorageProvider.objects.values_list("pk", "slug", "name"),
                "stack": StackOption.objects.values_list("pk", "slug", "name")}
        return {kind: {pk: (slug, name) for pk, slug, name in values} for kind, values in rows.items()}

    return catalog_cached("catalog.names", build)


def catalog_name(kind: str, pk: int | None, part: int = 0) -> str | None:
    """The slug (``part=1``: the name) of the catalog row ``pk`` of ``kind`` (``catalog_names``);
    a row added since this process read the catalog is read again. None for no row."""
    if pk is None:
        return None
    names = catalog_names()[kind]
    if pk not in names:
        catalog_cache_clear()
        names = catalog_names()[kind]
    return names[pk][part]
