"""The staff home's figures: counts per role and the dashboard's lists."""

from __future__ import annotations

from portal.orders.models import Order
from portal.orders.states import OrderState
from provisioning.inventory.selectors import inventory_summary
from provisioning.models import Node
from provisioning.monitoring.alerts import open_alerts
from provisioning.pipeline.selectors import runs_needing_attention
from provisioning.states import (
    NODE_FAILED,
)


def staff_counts(user) -> dict[str, int]:
    """What the staff navigation badges count: orders waiting for approval (approvers), failed
    runs and failed nodes (operators)."""
    counts = {"approvals": 0, "failures": 0}
    if user.is_approver:
        counts["approvals"] = Order.objects.filter(state=OrderState.PENDING_APPROVAL).count()
    if user.is_operator:
        counts["failures"] = (runs_needing_attention().count()
                              + Node.objects.filter(state__in=NODE_FAILED).count())
    return counts


def staff_dashboard(user, *, rows: int) -> dict:
    """The staff start page: the approval queue, what failed, and stock per SKU."""
    pending = (Order.objects.filter(state=OrderState.PENDING_APPROVAL)
               .select_related("organisation", "sku").order_by("state_changed_at", "pk"))
    return {
        "counts": staff_counts(user),
        "pending": list(pending[:rows]) if user.is_approver else [],
        "failed_runs": list(runs_needing_attention()[:rows]),
        "failed_nodes": list(Node.objects.filter(state__in=NODE_FAILED).select_related("sku")
                             .order_by("hostname")[:rows]) if user.is_operator else [],
        "stock": inventory_summary(),
        "alerts": list(open_alerts()[:rows]) if user.is_operator else [],
        "alert_count": open_alerts().count() if user.is_operator else 0,
    }
