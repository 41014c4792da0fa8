import getpass

from django.core.management.base import BaseCommand, CommandError

from portal.accounts.models import User
from portal.accounts.two_factor import required_reason, two_factor_reset


class Command(BaseCommand):
    help = ("Remove a person's authenticator app and recovery codes (a lost phone). Check who "
            "is asking first. Staff, and members of organisations that require it, set up a new "
            "app at their next sign-in; the person is told by e-mail.")

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--by", default="", help="who resets it, for the log (default: the "
                                                     "shell's user)")

    def handle(self, *args, username, by="", **options):
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        removed = two_factor_reset(user=user, by=by or f"manage.py ({getpass.getuser()})")
        if not removed:
            self.stdout.write(f"{username} had no two-factor devices; nothing changed.")
            return
        then = ("sets up a new app at the next sign-in" if required_reason(user)
                else "signs in with the password alone until they set up a new app")
        self.stdout.write(f"Removed {username}'s authenticator app and recovery codes; {username} {then}.")
