from django.core.paginator import Paginator
from django.shortcuts import render

from portal.catalog.forms import CatalogFilterForm
from portal.catalog.models import NetworkOption, NvmeOption, StorageProvider
from portal.catalog.selectors import sku_list
from portal.quotes.pricing import paid_prices
from portal.quotes.selectors import price_list_of_user

SKUS_PER_PAGE = 50  # the seeded catalog (about 30 SKUs) fits on one page


def catalog_list(request):
    form = CatalogFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    skus = sku_list(gpus=filters.get("gpus"), min_memory_gb=filters.get("memory"),
                    interconnect=filters.get("interconnect") or "", search=(filters.get("q") or "").strip(),
                    sort=filters.get("sort") or "")
    page = Paginator(skus, SKUS_PER_PAGE).get_page(request.GET.get("page"))
    template = "catalog/_sku_table.html" if request.htmx else "catalog/list.html"
    options = {"skus": list(page.object_list), "nvme": list(NvmeOption.objects.all()),
               "network": list(NetworkOption.objects.all()),
               "storage": list(StorageProvider.objects.all())}
    paid_prices(price_list_of_user(request.user), **options)
    return render(request, template, {
        "form": form,
        "skus": options["skus"], "page": page,
        "filtered": bool(filters and any(v for k, v in filters.items() if k != "sort")),
        "nvme_options": options["nvme"],
        "network_options": options["network"],
        "storage_providers": options["storage"],
    })
