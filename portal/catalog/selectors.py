from django.db.models import Count, Q, QuerySet

from portal.catalog.models import ServerSKU


def sku_list(*, gpus: int | None = None, min_memory_gb: int | None = None,
             interconnect: str = "", search: str = "") -> QuerySet[ServerSKU]:
    """Active SKUs with their GPU and `stock`: the inventory's ready nodes of each."""
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
    skus = skus.annotate(stock=Count("nodes", filter=Q(nodes__state="ready")))
    return skus.order_by("gpu__bf16_tflops", "gpu__memory_gb", "gpu_count")
