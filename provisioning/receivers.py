"""Provisioning's answers to the signals the apps below it declare (connected in
``ProvisioningConfig.ready``)."""

from __future__ import annotations

from portal.accounts.signals import members_left
from portal.orders.signals import order_email_lines
from portal.orders.states import OrderState
from provisioning.fulfilment.ssh_keys import active_email_lines, keys_sync


def _access_lines(sender, *, order, event, **_kwargs) -> list[str]:
    """What the "active" e-mail says about access."""
    return active_email_lines(order) if event.to_state == OrderState.ACTIVE else []


def _members_left(sender, *, organisation_ids, by=None, **_kwargs) -> None:
    """A key sync on their active servers, so the person's own keys stop opening them."""
    keys_sync(organisations=list(organisation_ids), by=by)


def connect() -> None:
    order_email_lines.connect(_access_lines, dispatch_uid="provisioning-order-email-lines")
    members_left.connect(_members_left, dispatch_uid="provisioning-members-left")
