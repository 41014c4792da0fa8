"""E-mail to the customer on every customer-visible order transition: rendered and sent by the
Celery task ``orders.order_event_notify`` (``portal.orders.tasks``), queued after the commit
(``portal.orders.transitions.order_event_notify_later``), never inside a request or a worker's
transaction."""

from __future__ import annotations

from django.conf import settings
from django.urls import NoReverseMatch, reverse

from portal.core import mail
from portal.orders.models import OrderEvent
from portal.orders.signals import order_email_lines
from portal.orders.states import OrderState

_SENTENCES = {
    OrderState.SUBMITTED: "We have received your order.",
    OrderState.PENDING_APPROVAL: "We have received your order; it is waiting for approval by our "
                                 "staff, who check that the job fits and that nodes are in stock.",
    OrderState.APPROVED: "Your order has been approved; servers are reserved for you.",
    OrderState.REJECTED: "Your order has been rejected.",
    OrderState.PROVISIONING: "We are setting up your servers.",
    OrderState.VERIFYING: "Your servers are installed and are being tested.",
    OrderState.ACTIVE: "Your servers are ready to use.",
    OrderState.PROVISION_FAILED: "Setting up your servers ran into a problem; our staff is on it.",
    OrderState.TERMINATING: "Your servers are being shut down and wiped.",
    OrderState.TERMINATED: "Your servers have been terminated and wiped.",
    OrderState.CANCELLED: "Your order has been cancelled.",
}
# Where the state alone does not say what happened (keyed by transition).
_TRANSITION_SENTENCES = {
    "drop_storage": "Object storage could not be set up for your order, so our staff removed it: "
                    "your servers are being set up without a bucket and the bucket is no longer "
                    "billed. Order a bucket again when you need one, or reply to this e-mail.",
    "expire_reservation": "The servers reserved for you went back to stock because setup did not "
                          "start in time; our staff will look at your order again.",
}
# What the customer hears of: received (or waiting), approved, ready, one e-mail per problem, and
# what they or staff decided (rejected, cancelled, termination). Setting up and testing are
# progress the order page shows live; a staff retry or node swap is not news. (Placing and
# submitting: the queued-for-approval or approval e-mail that follows says it was received.)
QUIET_TRANSITIONS = frozenset({"place", "submit", "start_provisioning", "verify", "retry"})


def is_news(event) -> bool:
    """Whether the customer gets an e-mail for ``event`` (read when the e-mail task runs, after
    the commit, so an automatic approval in the same submission is already recorded)."""
    if event.transition in QUIET_TRANSITIONS:
        return False
    earlier = OrderEvent.objects.filter(order_id=event.order_id, pk__lt=event.pk)
    later = OrderEvent.objects.filter(order_id=event.order_id, pk__gt=event.pk)
    if event.transition == "fail":
        # The customer was told of the problem at the first failure; a failed retry is the same.
        return not earlier.filter(to_state=OrderState.PROVISION_FAILED).exists()
    if event.to_state == OrderState.PENDING_APPROVAL and event.transition == "queue_for_approval":
        # Approved at once by the SKU's policy: the approval e-mail says it was received.
        return not later.filter(transition="approve", actor__isnull=True, api_key__isnull=True,
                                from_state=OrderState.PENDING_APPROVAL).exists()
    return True


def _approved_at_once(event) -> bool:
    return (event.transition == "approve" and event.actor_id is None and event.api_key_id is None
            and OrderEvent.objects.filter(order_id=event.order_id, pk__lt=event.pk,
                                          transition="queue_for_approval").count() == 1
            and not OrderEvent.objects.filter(order_id=event.order_id, pk__lt=event.pk)
            .exclude(transition__in=("place", "submit", "queue_for_approval")).exists())


# An event's note is for staff (approval notes with node hostnames, step errors, the reservation
# sweeper's note, …) and never goes into an e-mail. The customer reads the sentence for the new
# state and, on rejection, the reason, which staff write for the customer.


def order_url(order) -> str:
    for name, arg in (("orders:detail", order.reference), ("orders:detail", order.pk)):
        try:
            return settings.SITE_URL.rstrip("/") + reverse(name, args=[arg])
        except NoReverseMatch:
            continue
    return settings.SITE_URL


def recipients(order) -> list[str]:
    emails = {m.user.email for m in order.organisation.memberships.select_related("user")
              if m.user.email and m.user.is_active}
    if order.placed_by and order.placed_by.email:
        emails.add(order.placed_by.email)
    return sorted(emails)


def kept_data_sentence(order, *, done: bool) -> str:
    """What termination keeps, where and until when (the order's bucket, read through the
    reverse relation the provisioning app declares; no import of it)."""
    if not order.has_object_storage:
        return "No bucket was ordered: everything on the local disks is wiped."
    bucket = order.buckets.first() if hasattr(order, "buckets") else None
    where = (f"bucket {bucket.name} at {bucket.endpoint}" if bucket is not None
             else f"your bucket on {order.storage_provider}")
    if bucket is not None and bucket.retain_until:
        until = f"until {bucket.retain_until:%d %B %Y}"
    else:
        until = f"for {order.storage_retention_days} days"
    if done:
        return (f"The checkpoints in /data/checkpoints were copied to {where}; it is kept {until} "
                f"and then deleted. The servers' bucket keys were revoked with them: to download "
                f"your data, issue a read-only key on the order page (below). Questions: reply to "
                f"this e-mail.")
    return (f"Your access to the servers has ended. The checkpoints in /data/checkpoints are "
            f"copied to {where} before anything is removed; the bucket is kept {until} after "
            f"termination, then deleted.")


def _lines_from_apps(order, event) -> list[str]:
    """Paragraphs that apps above orders add to an e-mail (provisioning: how to log in), through
    the ``order_email_lines`` signal orders declares; no import of them."""
    lines = []
    for _receiver, extra in order_email_lines.send(sender=OrderEvent, order=order, event=event):
        lines += ["", *extra] if extra else []
    return lines


def order_event_notify(*, event_id: int) -> int:
    """Sends the e-mail for one order event; returns the number of messages sent (0 or 1)."""
    event = (OrderEvent.objects.select_related("order__organisation", "order__placed_by",
                                               "order__sku").filter(pk=event_id).first())
    if event is None:
        return 0
    order = event.order
    to = recipients(order)
    if not to or not is_news(event):
        return 0
    state_label = OrderState(event.to_state).label
    sentence = _TRANSITION_SENTENCES.get(event.transition) or _SENTENCES.get(event.to_state, "")
    if _approved_at_once(event):
        sentence = "We have received your order and approved it; servers are reserved for you."
    lines = [f"Order {order.reference} ({order.servers_label}): {state_label}.", "", sentence]
    if event.to_state == OrderState.REJECTED and order.rejection_reason:
        lines += ["", f"Reason: {order.rejection_reason}"]
    if event.to_state in (OrderState.TERMINATING, OrderState.TERMINATED):
        lines += ["", kept_data_sentence(order, done=event.to_state == OrderState.TERMINATED)]
    lines += _lines_from_apps(order, event)
    lines += ["", f"Details: {order_url(order)}"]
    # Raises on a mail outage: the Celery task (``orders.order_event_notify``) retries it; the
    # transition was committed before the task was queued and stays.
    return mail.send(subject=f"[Trainyard] Order {order.reference}: {state_label}",
                     body="\n".join(lines), to=to)
