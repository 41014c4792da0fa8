"""Reads of runs for staff: the runs that need someone."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from portal.orders.states import OrderState
from provisioning.models import ProvisioningRun
from provisioning.states import (
    RunKind,
    RunStatus,
)


def runs_needing_attention() -> QuerySet[ProvisioningRun]:
    """Failed runs that wait for staff (retry or swap): provisioning whose order failed, and
    hand-backs (terminations) that stopped, the customer's access already ended."""
    waiting = (Q(kind=RunKind.PROVISION, order__state=OrderState.PROVISION_FAILED)
               | Q(kind=RunKind.TERMINATE, order__state__in=(OrderState.TERMINATING,
                                                             OrderState.CANCELLED)))
    return (ProvisioningRun.objects.filter(waiting, status=RunStatus.FAILED)
            .select_related("order__organisation", "order__sku__gpu").order_by("finished_at"))
