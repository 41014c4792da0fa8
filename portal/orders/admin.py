from django.contrib import admin

from portal.orders.models import Order, OrderEvent


class OrderEventInline(admin.TabularInline):
    model = OrderEvent
    extra = 0
    can_delete = False
    readonly_fields = ("at", "actor", "transition", "from_state", "to_state", "note")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    """Read-mostly: state changes go through the approval pages and services, not this form."""

    list_display = ("reference", "organisation", "sku", "node_count", "state", "target_state",
                    "price_monthly", "created_at")
    list_filter = ("state", "sku")
    search_fields = ("reference", "organisation__name")
    # Staff may allow configure to erase what it finds on the data devices (the wipe flag).
    readonly_fields = [f.name for f in Order._meta.fields if f.name != "wipe_data_devices"]
    inlines = [OrderEventInline]

    def has_add_permission(self, request):
        return False
