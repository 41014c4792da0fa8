"""What the members part of an organisation page shows (a page's context, no writes)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from portal.accounts.forms import InviteForm
from portal.accounts.models import Invitation, Membership, Organisation
from portal.accounts.team import can_manage_members, pending, roles_for
from portal.accounts.two_factor import members_without


@dataclass(frozen=True)
class MemberRow:
    membership: Membership
    is_you: bool
    has_two_factor: bool = False


@dataclass(frozen=True)
class TeamSection:
    can_manage: bool
    members: list[MemberRow]
    roles: list[tuple[str, str]]
    invitations: list[Invitation] = field(default_factory=list)
    invite_form: InviteForm | None = None
    valid_days: int = 0
    without_two_factor: int = 0  # members with no authenticator app yet


def team_section(request, organisation: Organisation, *, invite_form=None) -> TeamSection:
    can_manage = can_manage_members(request.user, organisation)
    roles = roles_for(organisation)
    without = members_without(organisation)
    members = [MemberRow(m, m.user_id == request.user.pk, m.user_id not in without)
               for m in organisation.memberships.select_related("user").order_by("user__username")]
    if not can_manage:
        return TeamSection(can_manage=False, members=members, roles=roles)
    invitations = list(pending(organisation).order_by("email"))
    return TeamSection(can_manage=True, members=members, roles=roles, invitations=invitations,
                       invite_form=invite_form or InviteForm(roles=roles),
                       valid_days=settings.INVITATION_VALID_DAYS, without_two_factor=len(without))
