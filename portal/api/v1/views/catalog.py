"""GET /api/v1/catalog: GPU models, SKUs with stock, options, and prices as the key's
organisation pays them (its or its reseller's price list; a reseller's customer's key at the
reseller's selling prices)."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.selectors import primary_organisation
from portal.api.v1 import serializers_orders as so
from portal.catalog.cache import catalog_cached, catalog_rows, sku_stock
from portal.quotes.selectors import unit_prices_for


def catalog_snapshot(*, price_list) -> dict:
    """The serialised catalog for one price list, kept until the catalog changes (stock apart)."""
    def build():
        rows = catalog_rows()
        catalog = {"currency": "USD", "gpus": rows.gpus, "skus": rows.skus, "nvme": rows.nvme,
                   "networks": rows.networks, "storage": rows.storage, "stack": rows.stack}
        return so.CatalogOutputSerializer(catalog, context={"price_list": price_list}).data

    return catalog_cached(("api.catalog", price_list), build)


class CatalogView(APIView):
    @extend_schema(operation_id="catalog_retrieve", responses={200: so.CatalogOutputSerializer},
                   summary="What can be ordered: GPU models, server SKUs (with stock), options, and "
                           "prices as your organisation pays them")
    def get(self, request):
        body = catalog_snapshot(price_list=unit_prices_for(request.user, primary_organisation(request.user)))
        stock = sku_stock()
        skus = [sku | {"stock": stock.get(sku["slug"], 0)} for sku in body["skus"]]
        return Response({**body, "skus": skus})
