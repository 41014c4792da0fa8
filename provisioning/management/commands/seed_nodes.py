"""Simulated inventory for `make run`: a few ready nodes per active SKU. Idempotent."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from portal.catalog.models import ServerSKU
from provisioning.drivers import simulated_driver_names
from provisioning.models import Node, NodeEvent
from provisioning.states import NodeState, WipeMethod


def simulated_address(hostname: str) -> str:
    """A valid management address that resolves nowhere (RFC 6761 .invalid): the enrolment
    checks, the admin's change form included, accept it; no driver dials it."""
    return f"{hostname}.sim.invalid"


class Command(BaseCommand):
    help = "Enrol simulated nodes (ready) for every active SKU; clusters share a fabric group."

    def add_arguments(self, parser):
        parser.add_argument("--per-sku", type=int, default=2)
        parser.add_argument("--delay-scale", type=float, default=None,
                            help="simulated driver delays (default: SIMULATED_DRIVER_DELAY_SCALE)")

    @transaction.atomic
    def handle(self, *args, per_sku: int, delay_scale: float | None, **options):
        if settings.PRODUCTION:
            raise CommandError("seed_nodes enrols simulated nodes; TRAINYARD_ENV is production.")
        simulated = simulated_driver_names()
        if not simulated:
            raise CommandError("NODE_DRIVERS has no simulated driver to seed nodes with.")
        created = 0
        extra = {} if delay_scale is None else {"delay_scale": delay_scale}
        for sku in ServerSKU.objects.filter(is_active=True):
            for i in range(1, per_sku + 1):
                hostname = f"sim-{sku.slug}-{i:02d}"
                node, new = Node.objects.get_or_create(hostname=hostname, defaults={
                    "sku": sku, "management_address": simulated_address(hostname), "driver": simulated[0],
                    "driver_options": extra, "fabric_group": f"sim-{sku.slug}",
                    "nvme_devices": ["/dev/nvme0n1", "/dev/nvme1n1"], "wipe_method": WipeMethod.DISCARD,
                    "state": NodeState.READY,
                    "notes": "simulated node for the demo"})
                if new:
                    NodeEvent.objects.create(node=node, transition="enrol",
                                             from_state=NodeState.ENROLLED,
                                             to_state=NodeState.READY, note="seed_nodes")
                    created += 1
        self.stdout.write(f"simulated nodes: {created} enrolled, "
                          f"{Node.objects.filter(driver__in=simulated).count()} in total")
