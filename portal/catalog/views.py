from django.core.paginator import Paginator
from django.shortcuts import render

from portal.catalog.forms import CatalogFilterForm
from portal.catalog.models import NetworkOption, NvmeOption, StorageProvider
from portal.catalog.selectors import sku_list

SKUS_PER_PAGE = 50  # the seeded catalog (about 30 SKUs) fits on one page


def catalog_list(request):
    form = CatalogFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    skus = sku_list(gpus=filters.get("gpus"), min_memory_gb=filters.get("memory"),
                    interconnect=filters.get("interconnect") or "", search=(filters.get("q") or "").strip(),
                    sort=filters.get("sort") or "")
    page = Paginator(skus, SKUS_PER_PAGE).get_page(request.GET.get("page"))
    template = "catalog/_sku_table.html" if request.htmx else "catalog/list.html"
    return render(request, template, {
        "form": form,
        "skus": page.object_list, "page": page,
        "filtered": bool(filters and any(v for k, v in filters.items() if k != "sort")),
        "nvme_options": NvmeOption.objects.all(),
        "network_options": NetworkOption.objects.all(),
        "storage_providers": StorageProvider.objects.all(),
    })
