"""What every API view shares: the organisation a create call acts for. (Single rows are looked up
with get_object_or_404 in a tenant-scoped queryset: anyone else's is a 404, never a 403.)"""

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


def list_filters(serializer_class, request) -> dict:
    """The validated filters of a list request (a 400 by field); none given: nothing to check."""
    if not request.query_params:
        return {}
    filters = serializer_class(data=request.query_params)
    filters.is_valid(raise_exception=True)
    return filters.validated_data


def own_organisation(user):
    org = primary_organisation(user)
    if org is None:
        raise PermissionDenied("This login belongs to no organisation.")
    return org


