"""Imports the nodes of one Ironic resource class as Trainyard nodes of a SKU (enrolled, waiting
for an operator to accept them); hardware that does not match the SKU is listed, not imported."""

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from portal.catalog.models import ServerSKU
from provisioning.drivers import DriverError
from provisioning.inventory.engine_import import import_ironic_nodes, report_lines


class Command(BaseCommand):
    help = ("Import Ironic nodes of a resource class as nodes of a SKU; hardware facts from "
            "node.properties are checked against the SKU and mismatches listed.")

    def add_arguments(self, parser):
        parser.add_argument("--sku", required=True, help="the SKU slug the nodes become")
        parser.add_argument("--resource-class", required=True, help="Ironic resource class")
        parser.add_argument("--by", required=True, help="the operator's username (audited)")
        parser.add_argument("--dry-run", action="store_true", help="check and list, enrol nothing")

    def handle(self, *args, sku: str, resource_class: str, by: str, dry_run: bool, **options):
        try:
            the_sku = ServerSKU.objects.select_related("gpu").get(slug=sku)
        except ServerSKU.DoesNotExist:
            raise CommandError(f"no SKU {sku!r}") from None
        try:
            operator = get_user_model().objects.get(username=by)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user {by!r}") from None
        try:
            lines = import_ironic_nodes(by=operator, sku=the_sku, resource_class=resource_class,
                                        dry_run=dry_run)
        except (DriverError, PermissionDenied) as exc:
            raise CommandError(str(exc)) from None
        for text in report_lines(lines, f"node(s) of resource class {resource_class}"):
            self.stdout.write(text)

