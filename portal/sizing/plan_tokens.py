"""Signed tokens that carry a sizing plan through URLs and forms (wizard → configurator → quote)."""

from django.core import signing

PLAN_SALT = "trainyard.sizing.plan"
DAMAGED = "The sizing plan link is damaged; size the job again."


def plan_sign(plan: dict) -> str:
    """A tamper-proof token that carries a sizing plan through URLs and forms."""
    return signing.dumps(plan, salt=PLAN_SALT, compress=True)


def plan_unsign(token: str) -> dict:
    """The plan inside a token; ValueError when it was altered or is not a plan."""
    try:
        plan = signing.loads(token, salt=PLAN_SALT)
    except signing.BadSignature:
        raise ValueError(DAMAGED) from None
    if not isinstance(plan, dict):
        raise ValueError(DAMAGED)
    return plan
