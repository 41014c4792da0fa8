"""GET /api/v1/catalog: GPU models, SKUs with stock, options and list prices."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api.v1 import serializers_orders as so
from portal.catalog.models import GPUModel, NetworkOption, NvmeOption, StackOption, StorageProvider
from portal.catalog.selectors import sku_list


class CatalogView(APIView):
    @extend_schema(operation_id="catalog_retrieve", responses={200: so.CatalogOutputSerializer},
                   summary="What can be ordered: GPU models, server SKUs (with stock), options, prices")
    def get(self, request):
        catalog = {"currency": "USD", "gpus": GPUModel.objects.all(), "skus": sku_list(),
                   "nvme": NvmeOption.objects.all(), "networks": NetworkOption.objects.all(),
                   "storage": StorageProvider.objects.all(), "stack": StackOption.objects.all()}
        return Response(so.CatalogOutputSerializer(catalog).data)
