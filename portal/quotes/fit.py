"""The one verdict on whether a sizing plan fits a server: the configurator (before the quote),
the order page and the approval queue all read it.

Pure: works on a checked plan (``plan_check`` / ``plan_readable``) and a SKU-like object (its
``slug``, ``name`` and ``gpu.name`` / ``gpu.memory_bytes``); no database access.
"""

from __future__ import annotations

from dataclasses import dataclass

from portal.core.units import gb


@dataclass(frozen=True)
class PlanFit:
    """Whether a sizing plan fits a configuration. ``fits`` is None without a plan;
    ``memory_fits`` is False when the plan's memory per GPU exceeds the GPU's (that blocks a
    quote); other differences (another SKU, another node count) only make ``fits`` False."""

    fits: bool | None
    summary: str
    needed_bytes: int | None = None  # the plan's memory per GPU
    available_bytes: int | None = None  # the configured GPU's memory
    memory_fits: bool | None = None

    @property
    def percent(self) -> int:
        if not self.needed_bytes or not self.available_bytes:
            return 0
        return min(100, round(100 * self.needed_bytes / self.available_bytes))


def short_gpu_name(name: str) -> str:
    """"NVIDIA L4" → "L4": the vendor is the same for every GPU we sell."""
    return name.removeprefix("NVIDIA ").strip() or name


def plan_fit_verdict(plan: dict | None, *, sku, node_count: int) -> PlanFit:
    """Whether ``plan`` fits ``node_count`` × ``sku``: its SKU and node count, its headroom,
    and its memory per GPU against the GPU of ``sku``."""
    if not plan:
        return PlanFit(None, "No sizing plan attached.")
    problems = []
    if plan.get("sku") and plan["sku"] != sku.slug:
        problems.append(f"the plan was sized for {plan.get('sku_name') or plan['sku']}")
    if plan.get("nodes") and int(plan["nodes"]) != node_count:
        nodes = int(plan["nodes"])
        problems.append(f"the plan needs {nodes} node{'s' if nodes != 1 else ''}, this has "
                        f"{node_count}")
    headroom = plan.get("headroom_bytes")
    if headroom is not None and headroom < 0 and plan.get("sku") in (None, "", sku.slug):
        problems.append(f"it needs {gb(-headroom)} more GPU memory per GPU")
    needed = int(plan["per_gpu_total_bytes"]) if plan.get("per_gpu_total_bytes") else None
    available = sku.gpu.memory_bytes if needed else None
    if needed and needed > available:
        return PlanFit(False, f"needs {gb(needed)} per GPU, {short_gpu_name(sku.gpu.name)} has "
                              f"{gb(available)}.", needed, available, memory_fits=False)
    memory_fits = True if needed else None
    if problems:
        text = "; ".join(problems)
        return PlanFit(False, text[0].upper() + text[1:] + ".", needed, available, memory_fits)
    model = plan.get("model_label") or plan.get("model") or "The model"
    if headroom is not None:
        return PlanFit(True, f"{model} fits with {gb(headroom)} headroom per GPU.",
                       needed, available, memory_fits)
    return PlanFit(True, f"{model}: sized for this configuration.", needed, available, memory_fits)
