"""Host keys an imaging engine's install made, pinned from now on (the pipeline's deploy step)."""

from __future__ import annotations

from dataclasses import replace

from django.db import transaction

from portal.orders.models import Order
from provisioning.drivers import options_schema
from provisioning.models import Node, NodeEvent


def node_pin_host_keys(*, node: Node, host_keys: tuple[str, ...], order: Order | None = None) -> None:
    """The host keys an imaging engine's install made, pinned from now on (the old ones answer no
    more), with an audit event; the pipeline calls this after deploy_os."""
    with transaction.atomic():
        node = Node.objects.select_for_update().get(pk=node.pk)
        schema, stored = options_schema(node.driver), node.driver_options or {}
        options = schema.dump(replace(schema.parse(stored), host_key="\n".join(host_keys)), stored)
        if options == node.driver_options:
            return
        node.driver_options = options
        node.save(update_fields=["driver_options"])
        NodeEvent.objects.create(node=node, transition="pin_host_keys", from_state=node.state,
                                 to_state=node.state, order=order,
                                 note=f"{len(host_keys)} host key(s) from the new install pinned")
