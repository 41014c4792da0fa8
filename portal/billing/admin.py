"""Read-only views of the ledger and the documents: drafts are finalised and credit notes made
on the staff billing pages (services, audited); an issued document refuses every edit here too."""

from django.contrib import admin

from portal.billing.models import BillingProfile, Invoice, InvoiceEvent, InvoiceLine, UsageInterval


class InvoiceLineInline(admin.TabularInline):
    model = InvoiceLine
    extra = 0
    can_delete = False
    readonly_fields = ("key", "order", "description", "quantity", "amount", "position")

    def has_add_permission(self, request, obj=None):
        return False


class InvoiceEventInline(admin.TabularInline):
    model = InvoiceEvent
    extra = 0
    can_delete = False
    readonly_fields = ("at", "actor", "transition", "from_state", "to_state", "note")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Invoice)
class InvoiceAdmin(admin.ModelAdmin):
    list_display = ("__str__", "organisation", "kind", "period_start", "state", "total", "issued_at")
    list_filter = ("state", "kind")
    search_fields = ("number", "organisation__name")
    readonly_fields = [f.name for f in Invoice._meta.fields]
    inlines = [InvoiceLineInline, InvoiceEventInline]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return obj is None or not obj.is_issued

    def has_delete_permission(self, request, obj=None):
        return obj is not None and not obj.is_issued


@admin.register(BillingProfile)
class BillingProfileAdmin(admin.ModelAdmin):
    list_display = ("legal_name", "organisation", "country", "vat_id")
    search_fields = ("legal_name", "organisation__name", "vat_id")


@admin.register(UsageInterval)
class UsageIntervalAdmin(admin.ModelAdmin):
    list_display = ("order", "kind", "label", "started_at", "ended_at", "hourly", "share")
    list_filter = ("kind",)
    search_fields = ("order__reference", "label")
    readonly_fields = [f.name for f in UsageInterval._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
