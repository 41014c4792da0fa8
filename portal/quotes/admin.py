from django.contrib import admin

from portal.quotes.models import Quote


@admin.register(Quote)
class QuoteAdmin(admin.ModelAdmin):
    list_display = ("reference", "organisation", "sku", "node_count", "price_monthly",
                    "valid_until")
    list_filter = ("sku",)
    search_fields = ("reference", "organisation__name")
