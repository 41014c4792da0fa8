"""Imports the MAAS machines with a tag as Trainyard nodes of a SKU (enrolled, waiting for an
operator to accept them); hardware that does not match the SKU is listed, not imported."""

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from portal.catalog.models import ServerSKU
from portal.core.states import DomainError
from provisioning.drivers import DriverError
from provisioning.inventory.engine_import import import_maas_machines, report_lines


class Command(BaseCommand):
    help = ("Import the MAAS machines with a tag as nodes of a SKU; their GPUs, memory and CPUs "
            "as MAAS commissioned them are checked against the SKU and mismatches listed.")

    def add_arguments(self, parser):
        parser.add_argument("--sku", required=True, help="the SKU slug the machines become")
        parser.add_argument("--tag", required=True, help="the MAAS tag of the machines")
        parser.add_argument("--by", required=True, help="the operator's username (audited)")
        parser.add_argument("--dry-run", action="store_true", help="check and list, enrol nothing")

    def handle(self, *args, sku: str, tag: str, by: str, dry_run: bool, **options):
        try:
            the_sku = ServerSKU.objects.select_related("gpu").get(slug=sku)
            operator = get_user_model().objects.get(username=by)
        except (ServerSKU.DoesNotExist, get_user_model().DoesNotExist):
            raise CommandError(f"no SKU {sku!r} or no user {by!r}") from None
        try:
            lines = import_maas_machines(by=operator, sku=the_sku, tag=tag, dry_run=dry_run)
        except (DriverError, DomainError, PermissionDenied) as exc:
            raise CommandError(str(exc)) from None
        for text in report_lines(lines, f"MAAS machine(s) tagged {tag}"):
            self.stdout.write(text)
