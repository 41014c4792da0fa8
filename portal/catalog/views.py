from django.shortcuts import render

from portal.catalog.models import NetworkOption, NvmeOption, StorageProvider
from portal.catalog.selectors import sku_list


def catalog_list(request):
    return render(request, "catalog/list.html", {
        "skus": sku_list(),
        "nvme_options": NvmeOption.objects.all(),
        "network_options": NetworkOption.objects.all(),
        "storage_providers": StorageProvider.objects.all(),
    })
