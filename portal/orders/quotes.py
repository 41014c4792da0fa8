"""Quotes: a configuration, the sizing plan it came from and its price, frozen for N days."""

from __future__ import annotations

import json
from datetime import timedelta

from django.core import signing
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from portal.accounts.selectors import organisations_for
from portal.catalog.selectors import sku_list
from portal.orders import configurator
from portal.orders.models import QUOTE_VALID_DAYS, Quote


class ConfigurationError(ValueError):
    """The configuration breaks a rule; `problems` holds the messages (by form field)."""

    def __init__(self, problems: tuple[configurator.Message, ...]):
        self.problems = problems
        super().__init__(" ".join(p.text for p in problems))


def sku_stock(sku) -> int | None:
    """Ready nodes of this SKU (None for a SKU no longer sold)."""
    if hasattr(sku, "stock"):
        return sku.stock
    row = sku_list().filter(pk=sku.pk).first()
    return row.stock if row is not None else None


def configuration_evaluate(configuration: configurator.Configuration, *,
                           plan: dict | None = None) -> configurator.Evaluation:
    return configurator.evaluate(configuration, recommended_nvme_tb=(plan or {}).get("nvme_tb"),
                                 stock=sku_stock(configuration.sku))


# Plan figures the quote, order and approval pages compute with (the recommender's numbers).
PLAN_NUMBERS = ("nodes", "gpus_per_node", "gpus", "tp", "pp", "dp", "micro_batch", "grad_accum",
                "per_gpu_total_bytes", "gpu_memory_bytes", "usable_memory_bytes", "headroom_bytes",
                "tokens_per_second", "train_hours", "price_hourly_usd", "price_total_usd",
                "nvme_tb", "storage_tb")


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def plan_check(plan: dict | None) -> dict:
    """A copy of ``plan`` that pages can compute with; ValueError saying what is wrong."""
    plan = dict(plan or {})
    try:
        text = json.dumps(plan, allow_nan=False)
    except (TypeError, ValueError):
        raise ValueError("The sizing plan must be plain JSON data (finite numbers only).") from None
    if "\\u0000" in text.replace("\\\\", ""):  # PostgreSQL's jsonb cannot store NUL characters
        raise ValueError("The sizing plan must not contain NUL characters.")
    if plan.get("workload") is not None and not isinstance(plan["workload"], dict):
        raise ValueError("In the sizing plan, workload must be an object of the job's inputs.")
    bad = [key for key in PLAN_NUMBERS if plan.get(key) is not None and not _is_number(plan[key])]
    breakdown = plan.get("memory_breakdown_bytes")
    if breakdown is not None and not (isinstance(breakdown, dict)
                                      and all(_is_number(v) for v in breakdown.values())):
        bad.append("memory_breakdown_bytes (each term)")
    if bad:
        raise ValueError(f"In the sizing plan, {', '.join(bad)} must be a number; send the plan "
                         f"as POST /api/v1/recommendations returned it.")
    return plan


@transaction.atomic
def quote_create(*, organisation, by, configuration: configurator.Configuration,
                 plan: dict | None = None, valid_days: int = QUOTE_VALID_DAYS) -> Quote:
    """Price `configuration` now and freeze it; raises ConfigurationError when a rule fails."""
    plan = plan_check(plan)
    evaluation = configuration_evaluate(configuration, plan=plan)
    if not evaluation.ok:
        raise ConfigurationError(evaluation.errors)
    price = evaluation.price
    return Quote.objects.create(
        organisation=organisation,
        created_by=by if getattr(by, "pk", None) else None,
        sku=configuration.sku,
        node_count=configuration.node_count,
        nvme=configuration.nvme,
        network=configuration.network,
        storage_provider=configuration.storage_provider if configuration.storage_tb else None,
        storage_tb=configuration.storage_tb if configuration.storage_provider else 0,
        strategy=configuration.strategy,
        tracker=configuration.tracker,
        plan=plan,
        price_lines=[line.to_dict() for line in price.lines],
        price_hourly=price.hourly,
        price_monthly=price.monthly,
        valid_until=timezone.now() + timedelta(days=valid_days),
    )


def quotes_visible(*, organisations) -> QuerySet[Quote]:
    return Quote.objects.filter(organisation__in=organisations).select_related(
        "organisation", "sku__gpu", "nvme", "network", "storage_provider", "strategy", "tracker")


def quote_for_user(*, user, reference: str) -> Quote | None:
    """A quote of one of the user's organisations (None for anyone else: the view says 404)."""
    return quotes_visible(organisations=organisations_for(user)).filter(reference=reference).first()


PLAN_SALT = "trainyard.sizing.plan"


def plan_sign(plan: dict) -> str:
    """A tamper-proof token that carries a sizing plan through URLs and forms."""
    return signing.dumps(plan, salt=PLAN_SALT, compress=True)


def plan_unsign(token: str) -> dict:
    """The plan inside a token; ValueError when it was altered or is not a plan."""
    try:
        plan = signing.loads(token, salt=PLAN_SALT)
    except signing.BadSignature:
        raise ValueError("The sizing plan link is damaged; size the job again.") from None
    if not isinstance(plan, dict):
        raise ValueError("The sizing plan link is damaged; size the job again.")
    return plan
