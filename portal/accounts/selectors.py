from django.db.models import Q, QuerySet

from portal.accounts.models import ApiKey, Membership, Organisation, SSHKey
from portal.accounts.principals import ApiKeyPrincipal


def organisations_for(user) -> QuerySet[Organisation]:
    """Organisations a user may see: staff all; a reseller admin its own and its customers'.

    An API key acts for its organisation; a reseller's key also for the reseller's customers
    (never their customers' siblings elsewhere, never the reseller's parent)."""
    if not user.is_authenticated:
        return Organisation.objects.none()
    return Organisation.objects.filter(visible_to(user))


def organisation_ids_for(user) -> list[int] | None:
    """The ids of ``organisations_for(user)``, read first (one query on the person's
    memberships), or None for staff, who see all. A list filtered ``organisation_id__in=`` these
    ids is planned from exact values: the rule as a subquery with an OR is estimated to match
    most organisations and makes PostgreSQL read every order of every tenant."""
    if user.is_authenticated and not isinstance(user, ApiKeyPrincipal) and user.is_hosting_staff:
        return None
    return list(organisations_for(user).values_list("pk", flat=True))


def tenant_filter(user, field: str = "organisation") -> Q:
    """Rows of ``user``'s organisations (``organisation_ids_for``): ``Q()`` for staff."""
    ids = organisation_ids_for(user)
    return Q() if ids is None else Q(**{f"{field}_id__in": ids})


def visible_to(user, via: str = "") -> Q:
    """The rule of ``organisations_for`` as a filter on organisations or, with
    ``via="organisation__"``, on the rows of a model with a foreign key ``organisation``. A lookup
    of one row by a unique key filtered so needs no subquery; a list should filter
    ``organisation__in=organisations_for(user)`` instead (an index scan per organisation, where
    this rule on a join would read every row)."""
    if not user.is_authenticated:
        return Q(**{f"{via}pk__in": []})
    if isinstance(user, ApiKeyPrincipal):
        org = user.organisation
        own = Q(**{f"{via}pk": org.pk})
        if org.kind == Organisation.Kind.RESELLER:
            return own | Q(**{f"{via}parent_id": org.pk})
        return own
    if user.is_hosting_staff:
        return Q()
    memberships = Membership.objects.filter(user=user)
    admin_of = memberships.filter(role=Membership.Role.RESELLER_ADMIN).values("organisation")
    return Q(**{f"{via}pk__in": memberships.values("organisation")}) | Q(**{f"{via}parent__in": admin_of})


def primary_organisation(user) -> Organisation | None:
    if isinstance(user, ApiKeyPrincipal):
        return user.organisation
    membership = (
        Membership.objects.filter(user=user).select_related("organisation").order_by("pk").first()
    )
    return membership.organisation if membership else None


def api_keys_of(user, organisation: Organisation) -> QuerySet[ApiKey]:
    """``organisation``'s API keys, read through the tenancy rule (``tenant_filter``): none
    where ``user`` does not see ``organisation``. The API passes the caller's own organisation,
    so a reseller's key or admin lists and manages its own keys, not its customers'."""
    return ApiKey.objects.filter(tenant_filter(user), organisation=organisation)


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


def acting_organisation(user, *, customer: str = "") -> Organisation | None:
    """The organisation a create call acts for: the principal's own, or (``customer``, a slug)
    one of a reseller's customers. None when ``customer`` is not one the principal may act for."""
    own = primary_organisation(user)
    if not customer or (own is not None and customer == own.slug):
        return own
    return organisations_for(user).filter(slug=customer, parent__isnull=False).first()


def acts_for_reseller_of(user, organisation: Organisation) -> bool:
    """Whether ``user`` looks at ``organisation`` (a reseller's customer) as its reseller does:
    staff, the reseller's keys and the reseller's members. A customer's own members and keys
    do not."""
    if not organisation.parent_id or not user.is_authenticated:
        return False
    if isinstance(user, ApiKeyPrincipal):
        return user.organisation.pk == organisation.parent_id
    return user.is_hosting_staff or Membership.objects.filter(
        user=user, organisation_id=organisation.parent_id).exists()


def customers_of(reseller: Organisation) -> QuerySet[Organisation]:
    return Organisation.objects.filter(parent=reseller).order_by("name", "pk")


def customers_visible_to(user, reseller: Organisation) -> QuerySet[Organisation]:
    """The reseller's customers ``user`` may see (a reseller's plain member: none)."""
    return customers_of(reseller).filter(pk__in=organisations_for(user).values("pk"))


def can_manage_ssh_keys(user, organisation: Organisation) -> bool:
    """Who adds and removes an organisation's SSH keys: whoever manages its API keys (a
    reseller admin for its organisation and its customers; a customer's members; staff)."""
    return can_manage_api_keys(user, organisation)


def ssh_keys_of_organisation(organisation: Organisation) -> QuerySet[SSHKey]:
    return SSHKey.objects.filter(organisation=organisation).order_by("-created_at", "-pk")


def ssh_keys_of_user(user) -> QuerySet[SSHKey]:
    return SSHKey.objects.filter(user=user).order_by("-created_at", "-pk")


def ssh_keys_for_servers_of(organisation: Organisation) -> QuerySet[SSHKey]:
    """The keys that log in to ``organisation``'s servers: its own and its members' personal
    keys (of active accounts), oldest first so the installed file reads in a stable order."""
    members = Membership.objects.filter(organisation=organisation, user__is_active=True)
    return (SSHKey.objects.filter(Q(organisation=organisation) | Q(user__in=members.values("user")))
            .select_related("user").order_by("created_at", "pk"))
