"""Quotes and orders for tests. Needs the seeded catalog (the `catalog` fixture)."""

from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU, StackOption, StorageProvider
from portal.orders.models import Order, Quote
from portal.orders.states import OrderState

H100_SKU = "8x-h100-sxm-80gb"
L4_SKU = "1x-l4-24gb"


def make_quote(organisation, *, by=None, sku: str = H100_SKU, node_count: int = 1,
               network: str = "eth-100g", nvme: str = "nvme-2tb-single", storage: str | None = None,
               storage_tb: int = 0, valid_days: int = 14, plan: dict | None = None) -> Quote:
    sku_row = ServerSKU.objects.get(slug=sku)
    return Quote.objects.create(
        organisation=organisation, created_by=by, sku=sku_row, node_count=node_count,
        nvme=NvmeOption.objects.get(slug=nvme), network=NetworkOption.objects.get(slug=network),
        storage_provider=StorageProvider.objects.get(slug=storage) if storage else None,
        storage_tb=storage_tb, strategy=StackOption.objects.get(slug="fsdp"),
        tracker=StackOption.objects.get(slug="tensorboard"),
        plan=plan if plan is not None else {"model": "Llama-3-8B", "sku": sku, "nodes": node_count,
                                            "headroom_bytes": 12_000_000_000},
        price_lines=[{"label": sku_row.name, "hourly": str(sku_row.price_hourly),
                      "monthly": str(sku_row.price_monthly)}],
        price_hourly=sku_row.price_hourly * node_count,
        price_monthly=sku_row.price_monthly * node_count + Decimal("56.00"),
        valid_until=timezone.now() + timedelta(days=valid_days),
    )


def make_order(organisation, *, state: str = OrderState.DRAFT, by=None, **quote_kwargs) -> Order:
    """An order in ``state`` written directly (for state-table tests; real flows use services)."""
    quote = make_quote(organisation, by=by, **quote_kwargs)
    return Order.objects.create(
        organisation=organisation, placed_by=by, quote=quote, sku=quote.sku,
        node_count=quote.node_count, nvme=quote.nvme, network=quote.network,
        storage_provider=quote.storage_provider, storage_tb=quote.storage_tb,
        strategy=quote.strategy, tracker=quote.tracker, plan=quote.plan,
        price_lines=quote.price_lines, price_hourly=quote.price_hourly,
        price_monthly=quote.price_monthly, state=state,
    )
