from django.shortcuts import render

from portal.catalog.forms import CatalogFilterForm
from portal.catalog.models import NetworkOption, NvmeOption, StorageProvider
from portal.catalog.selectors import sku_list


def catalog_list(request):
    form = CatalogFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    skus = sku_list(gpus=filters.get("gpus"), min_memory_gb=filters.get("memory"),
                    interconnect=filters.get("interconnect") or "")
    template = "catalog/_sku_table.html" if request.htmx else "catalog/list.html"
    return render(request, template, {
        "form": form,
        "skus": skus,
        "filtered": bool(filters and any(filters.values())),
        "nvme_options": NvmeOption.objects.all(),
        "network_options": NetworkOption.objects.all(),
        "storage_providers": StorageProvider.objects.all(),
    })
