"""Demo organisations and logins for `make run`. Never used in production."""

import secrets
from dataclasses import dataclass

from django.db import transaction

from portal.accounts.models import Membership, Organisation, User


@dataclass(frozen=True)
class DemoLogin:
    username: str
    role: str


DEMO_USERS = (
    # username, role label, staff_role, org slug, membership role
    ("alice", "customer admin (Acme AI): invites the team", "", "acme-ai", Membership.Role.ADMIN),
    ("rita", "reseller admin (GPU Resale Ltd)", "", "gpu-resale", Membership.Role.RESELLER_ADMIN),
    ("sam", "staff approver", User.StaffRole.APPROVER, None, None),
    ("olga", "operator", User.StaffRole.OPERATOR, None, None),
)


@transaction.atomic
def demo_seed(*, password: str | None = None) -> tuple[str, list[DemoLogin]]:
    password = password or secrets.token_urlsafe(9)
    reseller, _ = Organisation.objects.get_or_create(
        slug="gpu-resale", defaults={"name": "GPU Resale Ltd", "kind": Organisation.Kind.RESELLER})
    Organisation.objects.get_or_create(
        slug="resale-client", defaults={"name": "Resale Client GmbH", "parent": reseller})
    Organisation.objects.get_or_create(slug="acme-ai", defaults={"name": "Acme AI"})
    logins = []
    for username, label, staff_role, org_slug, member_role in DEMO_USERS:
        user, _ = User.objects.get_or_create(username=username, defaults={
            "email": f"{username}@example.com", "first_name": username.capitalize()})
        user.staff_role = staff_role
        user.is_staff = bool(staff_role)
        user.set_password(password)
        user.save()
        if org_slug:
            Membership.objects.get_or_create(
                user=user, organisation=Organisation.objects.get(slug=org_slug),
                defaults={"role": member_role})
        logins.append(DemoLogin(username=username, role=label))
    admin, _ = User.objects.get_or_create(username="admin", defaults={"email": "admin@example.com"})
    admin.is_staff = admin.is_superuser = True
    admin.set_password(password)
    admin.save()
    logins.append(DemoLogin(username="admin", role="superuser (Django admin)"))
    return password, logins
