"""Stock as the catalog shows it: ready nodes per SKU. The catalog reads it through the setting
CATALOG_STOCK (it imports nothing of provisioning); inventory owns what "ready" means."""

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce

from provisioning.models import Node
from provisioning.states import NodeState


def _ready():
    return Node.objects.filter(state=NodeState.READY).order_by()


class ReadyNodes:
    @staticmethod
    def per_sku() -> dict[int, int]:
        """Ready nodes by SKU id, now; a SKU with none is absent."""
        return {row["sku_id"]: row["n"] for row in _ready().values("sku_id").annotate(n=Count("pk"))}

    @staticmethod
    def of_each_sku():
        """The ready nodes of each row of a SKU query, as an expression to annotate it with."""
        counted = _ready().filter(sku=OuterRef("pk")).values("sku").annotate(n=Count("pk")).values("n")
        return Coalesce(Subquery(counted), 0)
