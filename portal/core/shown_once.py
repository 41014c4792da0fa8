"""A secret made by a POST and shown once by the page it redirects to (post/redirect/get, so a
reload shows nothing new): kept encrypted in the session between the two, removed when read."""

from portal.core.crypto import decrypt, encrypt


def keep_for_next_page(request, name: str, secret: str) -> None:
    request.session[name] = encrypt(secret)


def pop_shown_once(request, name: str) -> str | None:
    """The secret kept under ``name``, this once; None when there is none (already shown)."""
    token = request.session.pop(name, None)
    return decrypt(token) if token else None
