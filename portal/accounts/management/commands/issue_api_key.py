from django.core.management.base import BaseCommand, CommandError

from portal.accounts.models import Organisation
from portal.accounts.services import api_key_issue


class Command(BaseCommand):
    help = "Issue an API key for an organisation. The key is printed once and stored hashed."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("--name", required=True, help="what the key is for")
        parser.add_argument("--scopes", default="read,write",
                            help="comma-separated: read, or read,write (default)")

    def handle(self, *args, org, name, scopes="read,write", **options):
        organisation = Organisation.objects.filter(slug=org).first()
        if organisation is None:
            raise CommandError(f"No organisation with slug {org!r}.")
        try:
            issued = api_key_issue(organisation=organisation, name=name,
                                   scopes=[s.strip() for s in scopes.split(",") if s.strip()])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(issued.plaintext)
        self.stderr.write(
            f"Key {issued.api_key.prefix} ({', '.join(issued.api_key.scopes)}) for {organisation.slug}: "
            f"store it now, it is not shown again."
        )
