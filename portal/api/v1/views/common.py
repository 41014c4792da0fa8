"""What every API view shares: the organisation a create call acts for, tenant-scoped lookups."""

from django.http import Http404
from rest_framework.exceptions import PermissionDenied, ValidationError

from portal.accounts.selectors import acting_organisation, primary_organisation
from portal.api.v1 import schema  # noqa: F401  (registers the API-key scheme)


def organisation_for_create(user, customer: str = ""):
    """The principal's organisation, or (a reseller's) customer ``customer``; 400 otherwise."""
    org = acting_organisation(user, customer=customer)
    if org is not None:
        return org
    if customer:
        raise ValidationError({"customer": [f"No customer {customer!r} of yours."]})
    raise PermissionDenied("This login belongs to no organisation, so it cannot hold quotes.")


def own_organisation(user):
    org = primary_organisation(user)
    if org is None:
        raise PermissionDenied("This login belongs to no organisation.")
    return org


def get_or_404(queryset, **lookup):
    """One row of a tenant-scoped queryset; anyone else's is a 404, never a 403."""
    row = queryset.filter(**lookup).first()
    if row is None:
        raise Http404
    return row


# Never read for an answer: the encrypted keys of a customer's own bucket.
UNREAD = ("storage_access_key_id", "storage_secret_key")


def lean(queryset, *related: str):
    """A quote or order queryset for the API's answers: only the rows named (catalog slugs come
    from the catalog cache) and none of the encrypted columns."""
    return queryset.select_related(None).select_related(*related).defer(*UNREAD)
