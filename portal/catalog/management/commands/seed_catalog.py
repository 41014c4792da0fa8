from django.core.management.base import BaseCommand

from portal.catalog.services import catalog_seed


class Command(BaseCommand):
    help = "Load or update GPU models, server SKUs, options and prices (idempotent)."

    def handle(self, *args, **options):
        counts = catalog_seed()
        self.stdout.write("Catalog seeded: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
