from rest_framework.permissions import SAFE_METHODS, BasePermission

from portal.accounts.principals import ApiKeyPrincipal


class KeyScope(BasePermission):
    """A key reads with the `read` scope and writes (POST, PATCH, …) only with `write`.
    A signed-in person (session) is limited by the services' own checks."""

    message = "This API key is read-only: unsafe methods need a key with the write scope."

    def has_permission(self, request, view):
        user = request.user
        if not isinstance(user, ApiKeyPrincipal):
            return True
        return user.has_scope("read" if request.method in SAFE_METHODS else "write")
