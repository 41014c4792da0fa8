"""Links that prove something by possession: an invitation to join an organisation, a new
account's e-mail, a changed e-mail. Each is signed with the site's key (``django.core.signing``)
and names what it proves, so nothing secret is stored and each works once:

- an invitation link names the invitation and its nonce (accepting or revoking it ends it);
- a verification link names the account, which it activates (a second click finds it active);
- an e-mail change link names the account, its e-mail then and the new one (once the e-mail
  has changed, the link no longer matches).
"""

from __future__ import annotations

from django.conf import settings
from django.core import signing

from portal.accounts.models import Invitation, User

INVITATION = "trainyard.accounts.invitation"
SIGNUP = "trainyard.accounts.signup"
EMAIL_CHANGE = "trainyard.accounts.email-change"


def _max_age_s() -> int:
    return settings.ACCOUNT_LINK_VALID_HOURS * 3600


def invitation_token(invitation: Invitation) -> str:
    return signing.dumps({"i": invitation.pk, "n": invitation.nonce}, salt=INVITATION)


def invitation_from_token(token: str) -> Invitation | None:
    """The invitation a link names (any state: the page says when it expired or was used)."""
    try:
        data = signing.loads(token, salt=INVITATION)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict):
        return None
    return (Invitation.objects.select_related("organisation")
            .filter(pk=data.get("i"), nonce=data.get("n")).first())


def signup_token(user: User) -> str:
    return signing.dumps({"u": user.pk}, salt=SIGNUP)


def user_from_signup_token(token: str) -> User | None:
    try:
        data = signing.loads(token, salt=SIGNUP, max_age=_max_age_s())
    except signing.BadSignature:  # SignatureExpired is one
        return None
    return User.objects.filter(pk=data.get("u")).first() if isinstance(data, dict) else None


def email_change_token(user: User, new_email: str) -> str:
    return signing.dumps({"u": user.pk, "old": user.email, "new": new_email}, salt=EMAIL_CHANGE)


def email_change_from_token(token: str) -> tuple[User, str] | None:
    """(the account, its new e-mail) while the link is fresh and the e-mail is still the old one."""
    try:
        data = signing.loads(token, salt=EMAIL_CHANGE, max_age=_max_age_s())
    except signing.BadSignature:
        return None
    if not isinstance(data, dict):
        return None
    user = User.objects.filter(pk=data.get("u"), email=data.get("old")).first()
    return (user, str(data.get("new") or "")) if user is not None and data.get("new") else None
