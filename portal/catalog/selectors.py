from django.apps import apps
from django.db.models import Count, Q, QuerySet

from portal.catalog.models import ServerSKU


def sku_list(*, gpus: int | None = None, min_memory_gb: int | None = None,
             interconnect: str = "") -> QuerySet[ServerSKU]:
    """Active SKUs with their GPU, and `stock` (ready nodes) once inventory exists."""
    skus = ServerSKU.objects.filter(is_active=True).select_related("gpu")
    if gpus:
        skus = skus.filter(gpu_count=gpus)
    if min_memory_gb:
        skus = skus.filter(gpu__memory_gb__gte=min_memory_gb)
    if interconnect == "pcie":
        skus = skus.filter(interconnect=ServerSKU.Interconnect.PCIE)
    elif interconnect == "nvlink":
        skus = skus.exclude(interconnect=ServerSKU.Interconnect.PCIE)
    if _has_inventory():
        skus = skus.annotate(stock=Count("nodes", filter=Q(nodes__state="ready")))
    return skus.order_by("gpu__bf16_tflops", "gpu__memory_gb", "gpu_count")


def _has_inventory() -> bool:
    try:
        apps.get_model("provisioning", "Node")
    except LookupError:
        return False
    return True
