"""E-mail to hosting staff, by role: who hears it (``APPROVERS``, ``OPERATORS``; superusers hold
every role) and how it goes out. Each message lives next to what it is about and calls
``staff_notify_later``: an order waiting for approval (``portal.orders.staff_notifications``), a
node failing its health check (``provisioning.monitoring.health``), an alert that opens
(``provisioning.monitoring.alerts``), failed provisioning and stopped terminations
(``provisioning.pipeline.engine``).

Queued after the commit of the change that causes it (``transaction.on_commit``) and sent by a
Celery task (``accounts.staff_notify`` in ``portal.accounts.tasks``, which finds the recipients),
never inside the request or a worker's transaction; a broker or mail outage is logged and never
undoes the change.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from portal.accounts.models import User
from portal.accounts.tasks import staff_notify_task

logger = logging.getLogger(__name__)

APPROVERS, OPERATORS = User.StaffRole.APPROVER.value, User.StaffRole.OPERATOR.value


def staff_notify_later(*, role: str, subject: str, lines: list[str], path: str) -> None:
    """Queues the e-mail to the staff holding ``role`` once the surrounding transaction commits;
    ``path`` is the page to open (made absolute with ``SITE_URL``)."""
    body = "\n".join([*lines, "", f"Open: {settings.SITE_URL.rstrip('/')}{path}"])

    def send():
        try:
            staff_notify_task.delay(role, f"[Trainyard staff] {subject}", body)
        except Exception:
            logger.exception("could not queue the staff e-mail", extra={"subject": subject})
    transaction.on_commit(send)
