from django.db.models import Q, QuerySet

from portal.accounts.models import Membership, Organisation


def organisations_for(user) -> QuerySet[Organisation]:
    """Organisations a user may see: staff all; a reseller admin its own and its customers'."""
    if not user.is_authenticated:
        return Organisation.objects.none()
    if user.is_hosting_staff:
        return Organisation.objects.all()
    memberships = Membership.objects.filter(user=user)
    admin_of = memberships.filter(role=Membership.Role.RESELLER_ADMIN).values("organisation")
    return Organisation.objects.filter(
        Q(pk__in=memberships.values("organisation")) | Q(parent__in=admin_of)
    ).distinct()


def primary_organisation(user) -> Organisation | None:
    membership = (
        Membership.objects.filter(user=user).select_related("organisation").order_by("pk").first()
    )
    return membership.organisation if membership else None


def can_manage_api_keys(user, organisation: Organisation) -> bool:
    """Staff; a reseller admin for its org and its customers; a customer's own members."""
    if user.is_hosting_staff:
        return True
    memberships = Membership.objects.filter(user=user)
    admin_scope = [organisation.pk, organisation.parent_id]
    if memberships.filter(organisation_id__in=admin_scope,
                          role=Membership.Role.RESELLER_ADMIN).exists():
        return True
    return (organisation.kind == Organisation.Kind.CUSTOMER
            and memberships.filter(organisation=organisation).exists())
