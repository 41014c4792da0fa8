from django.contrib import admin

from portal.catalog.models import (
    GPUModel,
    NetworkOption,
    NvmeOption,
    PriceList,
    PriceListItem,
    ResalePriceItem,
    ResalePriceList,
    ServerSKU,
    StackOption,
    StorageProvider,
)


@admin.register(GPUModel)
class GPUModelAdmin(admin.ModelAdmin):
    list_display = ("name", "memory_gb", "memory_bandwidth_gbps", "bf16_tflops", "fp8_tflops",
                    "nvlink_gbps", "pcie_gen", "tdp_w")
    search_fields = ("name", "slug")


@admin.register(ServerSKU)
class ServerSKUAdmin(admin.ModelAdmin):
    list_display = ("name", "gpu", "gpu_count", "interconnect", "price_hourly", "price_monthly",
                    "approval_policy", "is_active")
    list_filter = ("gpu", "interconnect", "approval_policy", "is_active")
    list_editable = ("price_hourly", "price_monthly", "is_active")
    search_fields = ("name", "slug")


@admin.register(NvmeOption)
class NvmeOptionAdmin(admin.ModelAdmin):
    list_display = ("slug", "size_tb", "drives", "raid", "price_monthly")


@admin.register(NetworkOption)
class NetworkOptionAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "speed_gbps", "on_request", "is_default", "price_monthly")


@admin.register(StorageProvider)
class StorageProviderAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "endpoint_url", "price_per_tb_monthly")


@admin.register(StackOption)
class StackOptionAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "data_parallel", "tensor_parallel", "pipeline_parallel",
                    "cpu_offload", "qlora", "fp8")
    list_filter = ("kind",)


class PriceListItemInline(admin.TabularInline):
    model = PriceListItem
    extra = 1
    fields = ("sku", "nvme", "network", "storage", "percent")
    verbose_name_plural = "Markups and discounts on single SKUs or options (one per row)"


@admin.register(PriceList)
class PriceListAdmin(admin.ModelAdmin):
    """A reseller's prices: applied to the reseller and every customer it sells to, in the catalog,
    the configurator, the wizard and every new quote (quotes already made keep their price)."""

    list_display = ("organisation", "name", "percent", "item_count", "updated_at")
    search_fields = ("organisation__name", "organisation__slug", "name")
    inlines = [PriceListItemInline]

    @admin.display(description="items")
    def item_count(self, obj):
        return obj.items.count()


class ResalePriceItemInline(admin.TabularInline):
    model = ResalePriceItem
    extra = 0
    fields = ("sku", "storage", "percent")
    readonly_fields = fields
    can_delete = False


@admin.register(ResalePriceList)
class ResalePriceListAdmin(admin.ModelAdmin):
    """What a reseller charges its customers, set by the reseller on its pages (read-only here:
    it changes only what its customers see of their usage, never what it is invoiced)."""

    list_display = ("reseller", "customer", "percent", "updated_at", "updated_by")
    search_fields = ("reseller__name", "reseller__slug", "customer__name")
    readonly_fields = ("reseller", "customer", "percent", "updated_at", "updated_by")
    inlines = [ResalePriceItemInline]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
