"""Signing in through the pages in Chromium: the password, then, for whoever has an authenticator
app (staff always), the token django-otp's TOTP algorithm computes from the app's key."""

from portal.accounts.models import User
from tests.factories import totp_token, two_factor_device

PASSWORD = "correct-horse-battery"


def log_in(page, base: str, username: str, password: str = PASSWORD) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: url == f"{base}/" or "/account/two-factor/" in url)
    if "/account/two-factor/verify/" in page.url:
        token_step(page, User.objects.get(username=username))
    page.wait_for_url(f"{base}/")


def token_step(page, user) -> None:
    page.get_by_label("Code").fill(totp_token(two_factor_device(user)))
    page.get_by_role("button", name="Verify").click()


def signed_in_page(browser, base: str, username: str, *, width: int, timeout_ms: int,
                   **context_options):
    """A new browser context ``width`` px wide with ``username`` signed in, and the list its page's
    console errors and uncaught exceptions go to: (context, page, errors)."""
    context = browser.new_context(viewport={"width": width, "height": 900}, **context_options)
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    errors: list[str] = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, base, username)
    return context, page, errors
