"""Recommender: search server configurations against the catalog and rank them (pure Python).

    from portal.sizing.recommend import recommend, Workload, Goal
    from portal.sizing.catalog_data import catalog_from_seed

    rec = recommend(Workload(model="llama-3.1-8b", dataset_tokens=2_000_000_000),
                    Goal("cheapest"), catalog_from_seed())
    rec.best.to_dict()   # the plan JSON stored in Quote.plan
    rec.to_dict()        # the REST answer

Every memory and time figure comes from portal.sizing.estimator; see search.py for the method.
"""

from . import infra
from .catalog import (
    CatalogData,
    GpuSpec,
    NetworkOptionSpec,
    NvmeOptionSpec,
    SkuSpec,
    StackOptionSpec,
    StorageProviderSpec,
)
from .engine import recommend
from .plan import PLAN_SCHEMA_VERSION, MemoryBreakdown, Plan, StackConfig, plan_estimate
from .search import MEMORY_RESERVE_FRACTION
from .strategies import STRATEGIES, Strategy, get_strategy
from .types import (
    GOALS,
    DataAdvice,
    Goal,
    Point,
    Recommendation,
    Rejection,
    SearchOptions,
    Workload,
)

__all__ = [
    "GOALS", "PLAN_SCHEMA_VERSION", "MEMORY_RESERVE_FRACTION", "STRATEGIES", "CatalogData", "DataAdvice",
    "GpuSpec", "Goal", "MemoryBreakdown", "NetworkOptionSpec", "NvmeOptionSpec", "Plan", "Point",
    "Recommendation", "Rejection", "SearchOptions", "SkuSpec", "StackConfig", "StackOptionSpec",
    "StorageProviderSpec", "Strategy", "Workload", "get_strategy", "infra", "plan_estimate", "recommend",
]
