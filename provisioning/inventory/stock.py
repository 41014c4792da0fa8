"""Stock as the catalog shows it: ready nodes per SKU. The catalog reads it through the setting
CATALOG_STOCK (it imports nothing of provisioning); inventory owns what "ready" means
(``Node.objects.ready()``)."""

from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce

from provisioning.inventory.allocation import ready_stock
from provisioning.models import Node


class ReadyNodes:
    @staticmethod
    def per_sku() -> dict[int, int]:
        """Ready nodes by SKU id, now; a SKU with none is absent."""
        return {sku_id: stock.total for sku_id, stock in ready_stock().items()}

    @staticmethod
    def of_each_sku():
        """The ready nodes of each row of a SKU query, as an expression to annotate it with."""
        counted = (Node.objects.ready().order_by().filter(sku=OuterRef("pk")).values("sku")
                   .annotate(n=Count("pk")).values("n"))
        return Coalesce(Subquery(counted), 0)
