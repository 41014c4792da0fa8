from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from portal.accounts.services_demo import demo_seed


class Command(BaseCommand):
    help = "Create demo organisations and logins (development only); prints the logins."

    def add_arguments(self, parser):
        parser.add_argument("--password", help="password for every demo login (default: random)")

    def handle(self, *args, password=None, **options):
        if settings.PRODUCTION:
            raise CommandError("seed_demo is for development; TRAINYARD_ENV is production.")
        password, logins = demo_seed(password=password)
        self.stdout.write(f"Demo logins (password for all: {password})")
        for login in logins:
            self.stdout.write(f"  {login.username:<8} {login.role}")
        self.stdout.write("Staff logins (sam, olga, admin) set up two-factor sign-in at their first "
                          "log-in: have an authenticator app ready.")
