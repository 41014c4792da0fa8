"""In real Chromium at 390 and 1280 px, a staff member's first sign-in: the password, then
enrolment (the key read off the page, as an authenticator app would take it), the token, the
recovery codes shown once; log out; sign in again with a token, and once with a recovery code.
Every page: no console error, no horizontal scroll.

Screenshots go to tmp_path, or to $TEST_SCREENSHOT_DIR when set (to look at them)."""

import base64
import os
import re
import time
from pathlib import Path

import pytest
from django_otp.oath import hotp
from playwright.sync_api import expect

from portal.accounts.models import User
from tests.browser_login import PASSWORD
from tests.factories import staff, totp_token, two_factor_device

NO_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"


def _app_code(manual_key: str) -> str:
    """What an authenticator app shows for the key typed in by hand (RFC 6238, 30 s, 6 digits)."""
    key = manual_key.replace(" ", "")
    secret = base64.b32decode(key + "=" * (-len(key) % 8))
    return f"{hotp(secret, int(time.time()) // 30):06d}"


def _password(page, base, username):
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def _log_out(page):
    if not page.get_by_role("button", name="Log out").is_visible():
        page.locator(".nav-toggle-label").click()  # the phone's menu
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url("**/accounts/login/")


@pytest.mark.browser
@pytest.mark.parametrize("width", (390, 1280))
def test_staff_enrol_then_sign_in_with_a_token_and_a_recovery_code(live_server, browser, width, tmp_path):
    shots = Path(os.environ.get("TEST_SCREENSHOT_DIR") or tmp_path)
    sam = staff(User.StaffRole.APPROVER, username="sam", two_factor=False)
    base, errors = live_server.url, []
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    def looked_at(name):
        assert page.evaluate(NO_SCROLL), f"{name} scrolls sideways at {width} px"
        page.screenshot(path=str(shots / f"two-factor-{name}-{width}.png"), full_page=True)

    # The password, then enrolment before anything else (the approval queue waits).
    _password(page, base, "sam")
    page.wait_for_url("**/account/two-factor/setup/**")
    expect(page.get_by_role("heading", name="Set up two-factor sign-in")).to_be_visible()
    expect(page.get_by_text("Staff accounts always sign in with a second factor")).to_be_visible()
    expect(page.locator("svg.qr")).to_be_visible()
    expect(page.get_by_role("link", name="Approvals")).to_have_count(0)
    looked_at("setup")
    page.goto(f"{base}/ops/approvals/")
    page.wait_for_url("**/account/two-factor/setup/**")

    page.get_by_label("Code from the app").fill("000000")
    page.get_by_role("button", name="Turn on two-factor sign-in").click()
    expect(page.get_by_text("That code does not match")).to_be_visible()
    looked_at("setup-error")
    assert [e for e in errors if "status of 400" not in e] == []  # the form's answer is a 400
    errors.clear()
    page.wait_for_timeout(1100)  # django-otp makes the next try wait a second after a wrong one
    page.get_by_label("Code from the app").fill(_app_code(page.locator("#manual-key").inner_text()))
    page.get_by_role("button", name="Turn on two-factor sign-in").click()

    # The recovery codes, once.
    expect(page.get_by_role("heading", name="Your recovery codes")).to_be_visible()
    codes = [c.strip() for c in page.locator("#recovery-codes code").all_inner_texts()]
    assert len(codes) == 10 and all(re.fullmatch(r"[a-z2-9]{5}-[a-z2-9]{5}", c) for c in codes)
    looked_at("codes")
    page.get_by_role("link", name="I have saved them: continue").click()
    page.goto(f"{base}/ops/approvals/")
    expect(page.get_by_role("heading", name="Approval queue")).to_be_visible()
    page.goto(f"{base}/account/two-factor/recovery-codes/")
    expect(page.locator("#recovery-codes")).to_have_count(0)  # not shown again
    looked_at("manage")
    _log_out(page)

    # Signing in again: password, then the app's code.
    _password(page, base, "sam")
    page.wait_for_url("**/account/two-factor/verify/**")
    expect(page.get_by_role("heading", name="Two-factor sign-in")).to_be_visible()
    looked_at("verify")
    page.get_by_label("Code").fill(totp_token(two_factor_device(sam)))
    page.get_by_role("button", name="Verify").click()
    page.wait_for_url(f"{base}/")
    page.goto(f"{base}/ops/approvals/")
    expect(page.get_by_role("heading", name="Approval queue")).to_be_visible()
    _log_out(page)

    # No phone: a recovery code, which then says how many are left.
    _password(page, base, "sam")
    page.wait_for_url("**/account/two-factor/verify/**")
    page.get_by_label("Code").fill(codes[0])
    page.get_by_role("button", name="Verify").click()
    expect(page.get_by_text("You signed in with a recovery code; 9 left")).to_be_visible()
    assert errors == []
    context.close()
