"""Loads the catalog seed (data/catalog.json). Idempotent: rows are matched by slug."""

import json
from pathlib import Path

from django.db import transaction

from portal.catalog.capabilities import (
    data_parallel_problems,
    model_family_problems,
    package_problems,
)
from portal.catalog.models import (
    GPUModel,
    NetworkOption,
    NvmeOption,
    ServerSKU,
    StackOption,
    StorageProvider,
)

SEED_PATH = Path(__file__).parent / "data" / "catalog.json"


def load_seed(path: Path = SEED_PATH) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


@transaction.atomic
def catalog_seed(*, data: dict | None = None) -> dict[str, int]:
    data = data or load_seed()
    counts = {}
    for row in data["gpus"]:
        GPUModel.objects.update_or_create(slug=row["slug"], defaults=_without(row, "slug"))
    counts["gpus"] = len(data["gpus"])
    gpus = {g.slug: g for g in GPUModel.objects.all()}
    for row in data["skus"]:
        defaults = _without(row, "slug", "gpu") | {"gpu": gpus[row["gpu"]]}
        ServerSKU.objects.update_or_create(slug=row["slug"], defaults=defaults)
    counts["skus"] = len(data["skus"])
    _check_stacks(data["stack"])
    for key, model in (("nvme", NvmeOption), ("network", NetworkOption),
                       ("storage", StorageProvider), ("stack", StackOption)):
        for row in data[key]:
            model.objects.update_or_create(slug=row["slug"], defaults=_without(row, "slug"))
        counts[key] = len(data[key])
    return counts


def _without(row: dict, *keys: str) -> dict:
    return {k: v for k, v in row.items() if k not in keys}


def _check_stacks(rows: list[dict]) -> None:
    """Stack rows declare known capabilities and pinned packages (the seed is loaded unvalidated)."""
    for row in rows:
        problems = (data_parallel_problems(row.get("data_parallel", []))
                    + model_family_problems(row.get("model_families", []))
                    + package_problems(row.get("packages", [])))
        if problems:
            raise ValueError(f"stack option {row.get('slug')!r}: {'; '.join(problems)}")
