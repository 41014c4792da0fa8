from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils.module_loading import import_string

from portal.accounts.selectors import acts_for_reseller_of
from portal.catalog.models import ResalePriceList, ServerSKU, StorageProvider
from portal.catalog.pricing import PriceList, Resale, resale

# How the catalog can be sorted: key → (label, ordering). The first is the default.
SKU_SORTS = {
    "": ("Performance", ("gpu__bf16_tflops", "gpu__memory_gb", "gpu_count")),
    "price": ("Price, lowest first", ("price_hourly", "gpu_count")),
    "-price": ("Price, highest first", ("-price_hourly", "-gpu_count")),
    "memory": ("GPU memory, most first", ("-gpu__memory_gb", "price_hourly")),
    "gpus": ("GPUs per server, most first", ("-gpu_count", "price_hourly")),
}


def sku_list(*, gpus: int | None = None, min_memory_gb: int | None = None,
             interconnect: str = "", search: str = "", sort: str = "") -> QuerySet[ServerSKU]:
    """Active SKUs with their GPU and `stock`: the inventory's ready nodes of each, in the
    order of ``sort`` (a key of SKU_SORTS)."""
    skus = ServerSKU.objects.filter(is_active=True).select_related("gpu")
    if search:
        skus = skus.filter(Q(slug__icontains=search) | Q(name__icontains=search)
                           | Q(gpu__name__icontains=search))
    if gpus:
        skus = skus.filter(gpu_count=gpus)
    if min_memory_gb:
        skus = skus.filter(gpu__memory_gb__gte=min_memory_gb)
    if interconnect == "pcie":
        skus = skus.filter(interconnect=ServerSKU.Interconnect.PCIE)
    elif interconnect == "nvlink":
        skus = skus.exclude(interconnect=ServerSKU.Interconnect.PCIE)
    skus = skus.annotate(stock=import_string(settings.CATALOG_STOCK).of_each_sku())
    return skus.order_by(*SKU_SORTS.get(sort, SKU_SORTS[""])[1], "slug")


# --- what a reseller charges its customers ------------------------------------------------------
def resale_list_of(reseller, customer=None) -> ResalePriceList | None:
    """The reseller's resale prices for ``customer`` exactly (None: its prices for every
    customer), with their items; None when it set none."""
    return (ResalePriceList.objects.filter(reseller=reseller, customer=customer)
            .prefetch_related("items__sku", "items__storage").first())


def resale_markup(row: ResalePriceList | None) -> PriceList:
    """Saved resale prices as the price function applies them (none saved: a markup of 0)."""
    if row is None:
        return PriceList(name="resale")
    return PriceList(percent=row.percent, name=f"resale:{row.reseller_id}:{row.customer_id or ''}",
                     items=tuple((item.key, item.percent) for item in row.items.all()))


def resale_markup_for(customer) -> PriceList | None:
    """What ``customer``'s reseller charges it on top of the reseller's cost: the customer's own
    resale prices, else the reseller's for every customer; None when ``customer`` has no
    reseller. A reseller that set nothing sells at its cost (a markup of 0)."""
    if customer is None or not getattr(customer, "parent_id", None):
        return None
    rows = {row.customer_id: row for row in ResalePriceList.objects.filter(
        Q(customer=customer) | Q(customer__isnull=True), reseller_id=customer.parent_id)
        .prefetch_related("items__sku", "items__storage")}
    return resale_markup(rows.get(customer.pk) or rows.get(None))


@dataclass(frozen=True)
class ResaleMarkups:
    """How ``viewer`` reads ``organisation``'s prices (``resale_markups``): ``basis``, the markup
    its prices are shown at (``price_basis``); ``shown``, the customer's markup a reseller sees
    beside its cost when it quotes for it."""

    basis: PriceList | None = None
    shown: PriceList | None = None


def resale_markups(viewer, organisation) -> ResaleMarkups:
    """Both markups, for a page that shows both (the configurator, a quote), with one check of
    who the viewer is and one read of the resale prices. A reseller's customer's own members and
    keys see what the reseller charges them (``basis``: its resale markup on the reseller's
    cost); the reseller (its members and keys, not staff) sees that beside its cost (``shown``);
    everyone else reads prices as they are frozen and invoiced."""
    if organisation is None or not organisation.parent_id:
        return ResaleMarkups()
    if not acts_for_reseller_of(viewer, organisation):
        return ResaleMarkups(basis=resale_markup_for(organisation))
    if getattr(viewer, "is_hosting_staff", False):
        return ResaleMarkups()
    return ResaleMarkups(shown=resale_markup_for(organisation))


def price_basis(viewer, organisation) -> PriceList | None:
    """The markup ``viewer`` reads ``organisation``'s prices with, on every page and endpoint
    (catalog, configurator, quotes, orders, usage): ``resale_markups(…).basis``, without reading
    the resale prices for a viewer who reads them at cost (the reseller, staff)."""
    if organisation is None or not organisation.parent_id or acts_for_reseller_of(viewer, organisation):
        return None
    return resale_markup_for(organisation)


@dataclass(frozen=True)
class ResaleRow:
    """One SKU or storage provider on the reseller's prices page: its list prices, and per
    amount (hourly, monthly; per TB-month for storage) the reseller's cost and its price."""

    key: str
    name: str
    percent: Decimal  # the markup that applies (its own, else the list's)
    own_percent: Decimal | None  # set for this item
    amounts: tuple[tuple[str, Resale], ...]  # (unit, cost and price): ("/h", …), ("/month", …)


def resale_rows(*, cost_list: PriceList | None, markup: PriceList,
                own: dict[str, Decimal]) -> tuple[list[ResaleRow], list[ResaleRow]]:
    """(servers, storage): every active SKU and storage provider priced side by side through
    ``portal.catalog.pricing.resale``; ``own``: the item markups the reseller set (by key)."""
    def row(key, name, amounts):
        return ResaleRow(key, name, markup.percent_for(key), own.get(key), tuple(
            (unit, resale(key, amount, cost_list=cost_list, markup=markup)) for unit, amount in amounts))

    servers = [row(f"sku:{s.slug}", s.name, (("/h", s.price_hourly), ("/month", s.price_monthly)))
               for s in sku_list(sort="")]
    storage = [row(f"storage:{p.slug}", p.name, (("/TB-month", p.price_per_tb_monthly),))
               for p in StorageProvider.objects.order_by("name")]
    return servers, storage
