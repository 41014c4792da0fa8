from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission

from portal.accounts.principals import ApiKeyPrincipal
from portal.accounts.selectors import can_manage_api_keys


class KeyScope(BasePermission):
    """A key reads with the `read` scope and writes (POST, PATCH, …) only with `write`. A view
    whose POST creates nothing (an estimate) says `post_scope = "read"`. A signed-in person
    (session) is checked per organisation by ``require_org_admin`` in the views that change
    what an organisation holds."""

    message = "This API key is read-only: unsafe methods need a key with the write scope."

    def has_permission(self, request, view):
        user = request.user
        if not isinstance(user, ApiKeyPrincipal):
            return True
        if request.method in SAFE_METHODS:
            return user.has_scope("read")
        if request.method == "POST" and getattr(view, "post_scope", "write") == "read":
            return user.has_scope("read")
        return user.has_scope("write")


def require_org_admin(user, organisation, *, what: str) -> None:
    """Who changes an organisation's keys, webhook endpoints and customers: a key with the write
    scope acting for it (KeyScope checked the scope, the tenant-scoped lookup the organisation),
    or a person who may manage its API keys (staff; a reseller's admin for the reseller and its
    customers; a customer's members). A reseller's plain member may not: a key or an endpoint of
    the reseller sees every customer. 403 otherwise."""
    if isinstance(user, ApiKeyPrincipal):
        if user.has_scope("write"):
            return
    elif can_manage_api_keys(user, organisation):
        return
    raise PermissionDenied(f"Only an admin of {organisation.name} can {what}.")
