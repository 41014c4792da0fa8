"""The sizing plan as quotes store it and the configurator reads it (``Plan.to_dict()`` JSON).

``plan_check`` decides what a quote may store (versioning: ``portal.sizing.recommend.plan``);
``plan_to_configuration`` is the server a plan names, by the slugs it carries.
"""

import json
import math

from portal.catalog.models import NetworkOption, NvmeOption, StackOption, StorageProvider
from portal.catalog.selectors import sku_list
from portal.quotes.configuration import Configuration
from portal.quotes.plan_bounds import plan_bound_problems
from portal.quotes.rules import pick_network, pick_nvme
from portal.sizing.recommend.plan import Plan, figure_problems, is_number, regime_from


def plan_check(plan: dict | None) -> dict:
    """A copy of ``plan`` that pages can compute with; ValueError saying what is wrong.

    A versioned plan must read back whole (``Plan.from_dict``); an unversioned one (stored
    before plans were versioned, or a reseller's partial plan) is kept as given when each
    figure it has is of the Plan's type for it."""
    plan = dict(plan or {})
    try:
        text = json.dumps(plan, allow_nan=False)
    except (TypeError, ValueError):
        raise ValueError("The sizing plan must be plain JSON data (finite numbers only).") from None
    if "\\u0000" in text.replace("\\\\", ""):  # PostgreSQL's jsonb cannot store NUL characters
        raise ValueError("The sizing plan must not contain NUL characters.")
    if bounds := plan_bound_problems(plan):
        raise ValueError(f"In the sizing plan, {'; '.join(bounds)}.")
    if plan.get("workload") is not None and not isinstance(plan["workload"], dict):
        raise ValueError("In the sizing plan, workload must be an object of the job's inputs.")
    if "schema_version" in plan:
        Plan.from_dict(plan)
        return plan
    regime_from(plan.get("estimator_regime"))  # what the stack deploys, refused now, not at provisioning
    bad = figure_problems(plan)
    if bad:
        raise ValueError(f"In the sizing plan, {', '.join(bad)} must be a number; send the plan "
                         f"as POST /api/v1/recommendations returned it.")
    return plan


UNREADABLE_PLAN = ("Unreadable sizing plan: it holds figures out of any sane range (stored before "
                   "plans were checked). Review the configuration by hand.")


def plan_readable(plan) -> dict | None:
    """A stored plan pages may compute with, or None: a plan stored before the checks of
    ``plan_check`` existed is shown as unreadable, never a 500."""
    try:
        return plan_check(plan) if isinstance(plan, dict) else None
    except (ValueError, RecursionError):
        return None


def plan_nvme_tb(plan: dict) -> float:
    """The NVMe size the plan recommends per node (0 when it says nothing usable)."""
    value = plan.get("nvme_tb")
    return float(value) if is_number(value) else 0.0


def plan_to_configuration(plan: dict) -> Configuration:
    """The server a plan names: SKU, nodes, NVMe option, network, bucket and stack, each by the
    slug the plan carries. A part the plan does not name (an unversioned plan) or that left the
    catalog gets the configurator's default for it; an unknown SKU stays None."""
    nodes = plan.get("nodes")
    nodes = int(nodes) if is_number(nodes) and nodes >= 1 else 1
    nvme = (NvmeOption.objects.filter(slug=_slug(plan, "nvme_option")).first()
            or pick_nvme(NvmeOption.objects.all(), plan_nvme_tb(plan), _slug(plan, "raid") or None))
    network = (NetworkOption.objects.filter(slug=_slug(plan, "network")).first()
               or pick_network(NetworkOption.objects.all(), nodes=nodes))
    storage_tb = plan.get("storage_tb")
    storage_tb = math.ceil(storage_tb) if is_number(storage_tb) and storage_tb > 0 else 0
    provider = None
    if storage_tb:
        provider = (StorageProvider.objects.filter(slug=_slug(plan, "storage_provider")).first()
                    or StorageProvider.objects.filter(kind="minio").first()
                    or StorageProvider.objects.first())
    return Configuration(
        sku=sku_list().filter(slug=_slug(plan, "sku")).first(), node_count=nodes, nvme=nvme,
        network=network, storage_provider=provider, storage_tb=storage_tb,
        strategy=StackOption.objects.filter(kind="strategy", slug=_slug(plan, "stack")).first())


def _slug(plan: dict, key: str) -> str:
    value = plan.get(key)
    return value if isinstance(value, str) else ""
