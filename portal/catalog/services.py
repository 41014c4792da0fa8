"""Loads the catalog seed (data/catalog.json). Idempotent: rows are matched by slug."""

import json
from decimal import Decimal, InvalidOperation
from pathlib import Path

from django.core.exceptions import PermissionDenied, ValidationError
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
    ResalePriceItem,
    ResalePriceList,
    ServerSKU,
    StackOption,
    StorageProvider,
)
from portal.catalog.pricing import MAX_PERCENT, MIN_PERCENT, to_decimal

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


# --- a reseller's prices for its customers ------------------------------------------------------
def _percent(value, field: str) -> Decimal:
    try:
        percent = to_decimal(value)
    except (InvalidOperation, TypeError, ValueError):
        raise ValidationError({field: f"{value!r} is not a number of percent, e.g. 25 or -5."}) from None
    if not percent.is_finite() or not MIN_PERCENT <= percent <= MAX_PERCENT:
        raise ValidationError({field: f"Give a markup between {MIN_PERCENT} and {MAX_PERCENT} %; "
                                      f"got {value}."})
    if percent != percent.quantize(Decimal("0.01")):
        raise ValidationError({field: f"Give the markup to at most two decimals; got {value}."})
    return percent


@transaction.atomic
def resale_prices_set(*, reseller, percent, items: dict[str, object], customer=None,
                      by=None) -> ResalePriceList:
    """Sets what ``reseller`` charges its customers (``customer``: that one customer only):
    ``percent`` over its cost for everything, and ``items`` by key (``sku:<slug>``,
    ``storage:<slug>``) where it differs (None: no own markup). Every value is checked before
    anything is written: a ValidationError (by field, named like the key) leaves the saved
    prices as they were."""
    if reseller.kind != "reseller":
        raise PermissionDenied("Only a reseller sets prices for its customers.")
    if customer is not None and customer.parent_id != reseller.pk:
        raise PermissionDenied(f"{customer.name} is not a customer of {reseller.name}.")
    targets = {f"sku:{s.slug}": ("sku", s) for s in ServerSKU.objects.filter(is_active=True)}
    targets |= {f"storage:{p.slug}": ("storage", p) for p in StorageProvider.objects.all()}
    errors, wanted = {}, {}
    try:
        overall = _percent(percent, "percent")
    except ValidationError as exc:
        errors |= exc.message_dict
    for key, value in items.items():
        if key not in targets:
            errors[key] = [f"No SKU or storage provider {key!r} is sold."]
        elif value is not None and value != "":
            try:
                wanted[key] = _percent(value, key)
            except ValidationError as exc:
                errors |= exc.message_dict
    if errors:
        raise ValidationError(errors)
    row, _ = ResalePriceList.objects.select_for_update().update_or_create(
        reseller=reseller, customer=customer,
        defaults={"percent": overall, "updated_by": by if getattr(by, "pk", None) else None})
    row.items.all().delete()
    ResalePriceItem.objects.bulk_create([
        ResalePriceItem(resale_list=row, percent=value, **{targets[key][0]: targets[key][1]})
        for key, value in wanted.items()])
    return row


def resale_prices_drop(*, reseller, customer) -> None:
    """``customer`` pays the reseller's prices for every customer again."""
    ResalePriceList.objects.filter(reseller=reseller, customer=customer).exclude(customer=None).delete()
