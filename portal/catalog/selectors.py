from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils.module_loading import import_string

from portal.catalog.models import ServerSKU

# How the catalog can be sorted: key → (label, ordering). The first is the default.
SKU_SORTS = {
    "": ("Performance", ("gpu__bf16_tflops", "gpu__memory_gb", "gpu_count")),
    "price": ("Price, lowest first", ("price_hourly", "gpu_count")),
    "-price": ("Price, highest first", ("-price_hourly", "-gpu_count")),
    "memory": ("GPU memory, most first", ("-gpu__memory_gb", "price_hourly")),
    "gpus": ("GPUs per server, most first", ("-gpu_count", "price_hourly")),
}


def sku_list(*, gpus: int | None = None, min_memory_gb: int | None = None,
             interconnect: str = "", search: str = "", sort: str = "") -> QuerySet[ServerSKU]:
    """Active SKUs with their GPU and `stock`: the inventory's ready nodes of each, in the
    order of ``sort`` (a key of SKU_SORTS)."""
    skus = ServerSKU.objects.filter(is_active=True).select_related("gpu")
    if search:
        skus = skus.filter(Q(slug__icontains=search) | Q(name__icontains=search)
                           | Q(gpu__name__icontains=search))
    if gpus:
        skus = skus.filter(gpu_count=gpus)
    if min_memory_gb:
        skus = skus.filter(gpu__memory_gb__gte=min_memory_gb)
    if interconnect == "pcie":
        skus = skus.filter(interconnect=ServerSKU.Interconnect.PCIE)
    elif interconnect == "nvlink":
        skus = skus.exclude(interconnect=ServerSKU.Interconnect.PCIE)
    skus = skus.annotate(stock=import_string(settings.CATALOG_STOCK).of_each_sku())
    return skus.order_by(*SKU_SORTS.get(sort, SKU_SORTS[""])[1], "slug")
