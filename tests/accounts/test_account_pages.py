"""Every person changes their password and e-mail in the portal (linked from the navigation);
a new e-mail counts once its link is followed. Self sign-up is off unless the operator turns it
on; then the account works only after its e-mail is verified."""

import re

import pytest

from portal.accounts import tokens
from portal.accounts.models import Membership, Organisation, User
from portal.accounts.tasks import email_change_send_task, signup_verify_send_task

PASSWORD = "a-long-passphrase-42"


@pytest.fixture
def mails_inline(monkeypatch):
    monkeypatch.setattr(email_change_send_task, "delay", lambda *a: email_change_send_task(*a))
    monkeypatch.setattr(signup_verify_send_task, "delay", lambda *a: signup_verify_send_task(*a))


def _path(body: str) -> str:
    return re.search(r"https?://[^/\s]+(/account/\S+/)", body).group(1)


def test_the_navigation_links_the_account_page_with_email_and_password(login, people):
    client = login(people.alice)
    assert 'href="/account/"' in client.get("/").content.decode()
    html = client.get("/account/").content.decode()
    assert "Change e-mail…" in html and "Change password…" in html and "Acme AI" in html
    assert client.get("/account/").status_code == 200


def test_anonymous_is_sent_to_log_in(client, db):
    for url in ("/account/", "/account/email/", "/accounts/password_change/"):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response.url


def test_changing_the_password_in_the_portal(login, people, client):
    client = login(people.alice)
    html = client.get("/accounts/password_change/").content.decode()
    assert "Change your password" in html and "Your account" in html  # our page, not the admin's
    wrong = client.post("/accounts/password_change/", {"old_password": "nope",
                                                       "new_password1": PASSWORD,
                                                       "new_password2": PASSWORD})
    assert "Your old password was entered incorrectly" in wrong.content.decode()
    done = client.post("/accounts/password_change/", {"old_password": "correct-horse-battery",
                                                      "new_password1": PASSWORD,
                                                      "new_password2": PASSWORD}, follow=True)
    assert "Password changed" in done.content.decode()
    people.alice.refresh_from_db()
    assert people.alice.check_password(PASSWORD)


def test_changing_the_email_takes_effect_once_the_link_is_followed(
        login, people, mails_inline, mailoutbox, django_capture_on_commit_callbacks):
    client = login(people.alice)
    wrong = client.post("/account/email/", {"email": "new@example.org", "current_password": "x"})
    assert wrong.status_code == 400 and "That is not your current password." in wrong.content.decode()
    taken = client.post("/account/email/", {"email": people.charlie.email,
                                            "current_password": "correct-horse-battery"})
    assert "Another account uses that e-mail address." in taken.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/account/email/", {"email": "new@example.org",
                                                   "current_password": "correct-horse-battery"})
    assert response.status_code == 302
    people.alice.refresh_from_db()
    assert people.alice.email == "alice@example.com"  # not yet
    [message] = mailoutbox
    assert message.to == ["new@example.org"]
    path = _path(message.body)
    assert "Use this address" in client.get(path).content.decode()
    client.post(path)
    people.alice.refresh_from_db()
    assert people.alice.email == "new@example.org"
    assert client.get(path).status_code == 410  # used: the old address no longer matches


def test_someone_elses_email_link_does_not_work(login, people):
    token = tokens.email_change_token(people.alice, "evil@example.org")
    response = login(people.charlie).post(f"/account/email/confirm/{token}/")
    assert response.status_code == 410
    people.alice.refresh_from_db()
    assert people.alice.email == "alice@example.com"


# --- self sign-up ----------------------------------------------------------------------------
SIGNUP = {"organisation_name": "Deep Labs", "first_name": "Dana", "email": "dana@deeplabs.example",
          "username": "dana", "password": PASSWORD, "password_again": PASSWORD}


def test_sign_up_is_off_by_default(client, db, settings):
    assert settings.SIGNUP_ENABLED is False
    assert client.get("/account/signup/").status_code == 404
    assert client.post("/account/signup/", SIGNUP).status_code == 404
    assert "Create an account" not in client.get("/accounts/login/").content.decode()
    assert not User.objects.filter(username="dana").exists()


def test_sign_up_when_on_works_only_after_the_email_is_verified(
        client, db, settings, mails_inline, mailoutbox, django_capture_on_commit_callbacks):
    settings.SIGNUP_ENABLED = True
    assert "Create an account" in client.get("/accounts/login/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/account/signup/", SIGNUP)
    assert "Check your e-mail" in response.content.decode()
    dana = User.objects.get(username="dana")
    assert not dana.is_active
    org = Organisation.objects.get(slug="deep-labs")
    assert Membership.objects.get(user=dana, organisation=org).role == "admin"
    refused = client.post("/accounts/login/", {"username": "dana", "password": PASSWORD})
    assert refused.status_code == 200  # locked until verified: the login page again, no redirect
    [message] = mailoutbox
    path = _path(message.body)
    client.post(path)
    dana.refresh_from_db()
    assert dana.is_active
    assert client.get("/account/").status_code == 200  # logged in by the confirmation
    client.logout()
    assert "confirmed already" in client.post(path, follow=True).content.decode()


def test_sign_up_validates_in_words(client, db, settings, people):
    settings.SIGNUP_ENABLED = True
    response = client.post("/account/signup/", SIGNUP | {"organisation_name": "Acme AI"})
    assert response.status_code == 400 and "already exists; ask its admin" in response.content.decode()
    response = client.post("/account/signup/", SIGNUP | {"password": "123", "password_again": "123"})
    assert "This password is too short" in response.content.decode()
    assert not User.objects.filter(username="dana").exists()


def test_a_deactivated_account_is_not_revived_by_an_old_sign_up_link(client, db, settings):
    settings.SIGNUP_ENABLED = True
    user = User.objects.create_user("mallory", "m@example.org", PASSWORD, is_active=True)
    user.last_login = user.date_joined
    user.is_active = False  # staff deactivated it after it was used
    user.save()
    client.post(f"/account/signup/verify/{tokens.signup_token(user)}/")
    user.refresh_from_db()
    assert not user.is_active
