"""Who may open a staff page: one decorator for every app's staff views."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404


def staff_only(check, *, role: str):
    """Logged in and ``check(user)``. Anyone who is not hosting staff gets 404 (customers must
    not learn these pages exist); staff with another role get 403 naming the role needed."""
    def decorator(view):
        @wraps(view)
        @login_required
        def wrapped(request, *args, **kwargs):
            if not check(request.user):
                if not request.user.is_hosting_staff:
                    raise Http404("No such page.")
                raise PermissionDenied(
                    f"This page is for {role}. Your role is {request.user.get_staff_role_display().lower()}; "
                    "ask an administrator if you need the other role.")
            return view(request, *args, **kwargs)
        return wrapped
    return decorator


operator_only = staff_only(lambda u: u.is_operator, role="operators")
