"""In real Chromium at 390 and 1280 px: an organisation admin invites a colleague by e-mail; the
colleague follows the link, creates a login and lands in the organisation; the admin sees them
among the members."""

import re

import pytest
from django.core import mail
from playwright.sync_api import expect

from portal.accounts.models import Membership
from portal.accounts.tasks import invitation_send_task
from tests.browser_login import log_in as _log_in

NO_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"


@pytest.mark.browser
@pytest.mark.parametrize("width", (390, 1280))
def test_invite_accept_and_see_the_new_member(live_server, browser, people, monkeypatch, width,
                                              tmp_path, settings):
    settings.SITE_URL = live_server.url
    monkeypatch.setattr(invitation_send_task, "delay", lambda pk: invitation_send_task(pk))
    Membership.objects.filter(user=people.alice).update(role=Membership.Role.ADMIN)
    errors = []
    contexts = [browser.new_context(viewport={"width": width, "height": 900}) for _ in range(2)]
    admin, guest = (context.new_page() for context in contexts)
    admin.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))  # noqa: B023
    _log_in(admin, live_server.url, "alice")
    admin.goto(f"{live_server.url}/orgs/{people.acme.slug}/")
    admin.get_by_label("E-mail address").fill("bob@example.org")
    admin.get_by_label("Role", exact=True).select_option("member")
    admin.get_by_role("button", name="Send invitation").click()
    expect(admin.get_by_text("Invitation sent to bob@example.org")).to_be_visible()
    expect(admin.locator("#members")).to_contain_text("Invited, not joined yet")
    admin.locator("#members").screenshot(path=str(tmp_path / f"members-{width}.png"))
    assert admin.evaluate(NO_SCROLL)

    link = re.search(r"https?://\S+/account/invitations/\S+/", mail.outbox[-1].body).group(0)
    guest.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))  # noqa: B023
    guest.goto(link)
    expect(guest.get_by_role("heading", name="Join Acme AI")).to_be_visible()
    guest.screenshot(path=str(tmp_path / f"accept-{width}.png"), full_page=True)
    assert guest.evaluate(NO_SCROLL)
    guest.get_by_label("Your name").fill("Bob")
    guest.get_by_label("Username").fill("bob")
    guest.get_by_label("Password", exact=True).fill("a-long-passphrase-42")
    guest.get_by_label("Password again").fill("a-long-passphrase-42")
    guest.get_by_role("button", name="Create login and join").click()
    expect(guest.get_by_text("Welcome to Acme AI.")).to_be_visible()
    guest.goto(f"{live_server.url}/account/")
    expect(guest.get_by_role("heading", name="Your account")).to_be_visible()
    guest.screenshot(path=str(tmp_path / f"account-{width}.png"), full_page=True)
    assert guest.evaluate(NO_SCROLL)

    admin.reload()
    expect(admin.locator("#members")).to_contain_text("bob@example.org")
    expect(admin.locator("#members")).not_to_contain_text("Invited, not joined yet")
    assert errors == []
    for context in contexts:
        context.close()
