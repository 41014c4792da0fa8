"""E-mail to hosting staff, by role: approvers hear of orders waiting for approval, operators of
nodes failing their health check (and, from the pipeline, of failed provisioning and stopped
terminations, with the run's link: ``provisioning.pipeline.engine``).

Queued after the commit of the change that causes it (``transaction.on_commit``) and sent by a
Celery task (``orders.staff_notify``), never inside the request or a worker's transaction; a
broker or mail outage is logged and never undoes the change.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from portal.orders.states import OrderState
from portal.orders.tasks import APPROVERS, OPERATORS, staff_notify_task

logger = logging.getLogger(__name__)

def staff_notify_later(*, role: str, subject: str, lines: list[str], path: str) -> None:
    """Queues the e-mail once the surrounding transaction commits."""
    body = "\n".join([*lines, "", f"Open: {settings.SITE_URL.rstrip('/')}{path}"])

    def send():
        try:
            staff_notify_task.delay(role, f"[Trainyard staff] {subject}", body)
        except Exception:
            logger.exception("could not queue the staff e-mail", extra={"subject": subject})
    transaction.on_commit(send)


def order_moved_notify_staff(order, to_state: str, note: str = "") -> None:
    """Called by the order transition: the states staff must act on."""
    what = f"{order.reference}: {order.servers_label} for {order.organisation.name}"
    if to_state == OrderState.PENDING_APPROVAL:
        staff_notify_later(role=APPROVERS, subject=f"Order {order.reference} waits for approval",
                           lines=[f"New order {what} waits for approval."], path="/ops/approvals/")


def node_unhealthy_notify_staff(node, problems: list[str]) -> None:
    staff_notify_later(role=OPERATORS, subject=f"Node {node.hostname} failed its health check",
                       lines=[f"Node {node.hostname} ({node.sku.name}, {node.get_state_display()}) "
                              f"failed its health check:", *[f"- {p}" for p in problems]],
                       path=f"/ops/nodes/{node.pk}/")
