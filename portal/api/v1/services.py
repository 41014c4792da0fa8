"""The one write the API composes from the web's services: an order placed and submitted in one
transaction, from a quote or from an inline configuration (quoted first)."""

from __future__ import annotations

from django.db import transaction

from portal.orders.models import Order
from portal.orders.services import order_place
from portal.quotes.configuration import Configuration
from portal.quotes.models import Quote
from portal.quotes.services import quote_create
from provisioning.fulfilment import order_submit


@transaction.atomic
def order_create_and_submit(*, by, quote: Quote | None = None, organisation=None,
                            configuration: Configuration | None = None,
                            plan: dict | None = None) -> Order:
    """Places ``quote`` (or a quote made now from ``configuration`` for ``organisation``) and
    submits it: pending approval, or approved at once where the SKU's policy allows. All or
    nothing: a refused submission leaves no draft order behind."""
    if quote is None:
        quote = quote_create(organisation=organisation, by=by, configuration=configuration, plan=plan)
    order = order_place(quote=quote, by=by, organisation=organisation)
    return order_submit(order=order, by=by)
