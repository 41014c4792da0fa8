"""Who may change inventory and runs: the checks the services of each room start with."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied


def require_operator(by) -> None:
    if not getattr(by, "is_operator", False):
        raise PermissionDenied("Only operators can change the node inventory.")


def require_staff(by) -> None:
    if not (getattr(by, "is_approver", False) or getattr(by, "is_operator", False)):
        raise PermissionDenied("Only staff approvers and operators can do this.")
