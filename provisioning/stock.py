"""Stock as the catalog shows it: ready nodes per SKU (the catalog reads it through the setting
CATALOG_STOCK_SOURCE; it imports nothing of provisioning)."""

from django.db.models import Count

from provisioning.models import Node
from provisioning.states import NodeState


def ready_nodes_per_sku() -> dict[int, int]:
    """Ready nodes by SKU id, now; a SKU with none is absent."""
    rows = Node.objects.filter(state=NodeState.READY).order_by().values("sku_id").annotate(n=Count("pk"))
    return {row["sku_id"]: row["n"] for row in rows}
