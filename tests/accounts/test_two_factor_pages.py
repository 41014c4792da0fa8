"""Two-factor sign-in through the pages: the password step (axes still throttles it), the token
step, enrolment forced on staff and on members of an organisation that requires it, the Django
admin behind the second factor, the API's keys unaffected, and the password-change e-mail."""

import re

import pytest
from django.test import Client
from django_otp.plugins.otp_totp.models import TOTPDevice

from portal.accounts import two_factor
from portal.accounts.models import Membership, User
from portal.accounts.services import api_key_issue
from portal.accounts.tasks import security_notice_task
from tests.factories import UserFactory, member_of, staff, totp_token, two_factor_device

pytestmark = pytest.mark.django_db
PASSWORD = "correct-horse-battery"
VERIFY = "/account/two-factor/verify/"
SETUP = "/account/two-factor/setup/"


def _password_step(username, next_url="", ip="10.0.0.1") -> tuple[Client, object]:
    client = Client()
    response = client.post("/accounts/login/" + (f"?next={next_url}" if next_url else ""),
                           {"username": username, "password": PASSWORD, "next": next_url},
                           REMOTE_ADDR=ip)
    return client, response


def _token_from_setup_page(client, user) -> str:
    """What the person's app would show after scanning the page's QR code (its key)."""
    page = client.get(SETUP).content.decode()
    assert "<svg" in page and "manual-key" in page
    return totp_token(TOTPDevice.objects.get(user=user, confirmed=False))


# --- staff ----------------------------------------------------------------------------------------
def test_staff_without_an_app_reach_nothing_but_enrolment():
    sam = staff(User.StaffRole.APPROVER, username="sam", two_factor=False)
    client, response = _password_step("sam", next_url="/ops/approvals/")
    assert response.status_code == 302 and response["Location"] == "/ops/approvals/"
    for path in ["/ops/approvals/", "/orders/", "/", "/account/", "/admin/", "/account/ssh-keys/"]:
        response = client.get(path)
        assert response.status_code == 302, path
        assert response["Location"].startswith(SETUP + "?next="), (path, response["Location"])
    assert client.post("/ops/approvals/").status_code == 302  # a POST too, and it did nothing
    page = client.get(SETUP).content.decode()
    assert "Staff accounts always sign in with a second factor" in page
    assert "Approvals" not in page and "Log out" in page  # the nav offers only the way out
    token = _token_from_setup_page(client, sam)
    response = client.post(SETUP, {"token": token, "next": "/ops/approvals/"})
    assert response.status_code == 302 and response["Location"] == "/account/two-factor/recovery-codes/"
    page = client.get(response["Location"]).content.decode()
    codes = re.findall(r"<code>([a-z2-9]{5}-[a-z2-9]{5})</code>", page)
    assert len(codes) == 10
    again = client.get("/account/two-factor/recovery-codes/")  # shown once
    assert again.status_code == 302 and not re.findall(r"[a-z2-9]{5}-[a-z2-9]{5}", again.content.decode())
    assert client.get("/ops/approvals/").status_code == 200


def test_staff_with_an_app_type_a_token_after_the_password():
    sam = staff(User.StaffRole.APPROVER, username="sam")
    client, response = _password_step("sam")
    assert response["Location"] == "/"
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == f"{VERIFY}?next=%2F"
    assert client.get("/ops/approvals/")["Location"] == f"{VERIFY}?next=%2Fops%2Fapprovals%2F"
    wrong = client.post(VERIFY, {"token": "12345", "next": "/ops/approvals/"})
    assert wrong.status_code == 400 and "6-digit code" in wrong.content.decode()
    assert client.get("/ops/approvals/").status_code == 302
    half_signed_in = client.session.session_key
    right = client.post(VERIFY, {"token": totp_token(two_factor_device(sam)), "next": "/ops/approvals/"})
    assert right.status_code == 302 and right["Location"] == "/ops/approvals/"
    assert client.session.session_key != half_signed_in  # a new key for the greater rights
    assert client.get("/ops/approvals/").status_code == 200


def test_a_recovery_code_signs_in_once_and_says_how_many_are_left():
    user = UserFactory(username="dana")
    device = two_factor.enrolment_device(user)
    codes = two_factor.enrolment_confirm(user=user, device=device, token=totp_token(device))
    client, _ = _password_step("dana")
    response = client.post(VERIFY, {"token": codes[0], "next": "/account/"}, follow=True)
    assert response.redirect_chain[0][0] == "/account/"
    assert "9 left" in response.content.decode()
    other, _ = _password_step("dana")
    assert other.post(VERIFY, {"token": codes[0]}).status_code == 400


def test_the_token_page_does_not_send_anyone_elsewhere():
    sam = staff(User.StaffRole.APPROVER, username="sam")
    client, _ = _password_step("sam")
    response = client.post(VERIFY, {"token": totp_token(two_factor_device(sam)),
                                    "next": "https://evil.example/phish"})
    assert response.status_code == 302 and response["Location"] == "/"


def test_an_htmx_request_is_told_to_load_the_token_page():
    staff(User.StaffRole.OPERATOR, username="olga")
    client, _ = _password_step("olga")
    response = client.get("/ops/nodes/", HTTP_HX_REQUEST="true")
    assert response.status_code == 204 and response["HX-Redirect"] == VERIFY


def test_a_half_signed_in_session_cannot_set_up_a_second_app_to_skip_the_token():
    staff(User.StaffRole.APPROVER, username="sam")
    client, _ = _password_step("sam")
    response = client.get(SETUP)
    assert response.status_code == 302 and response["Location"].startswith(VERIFY)
    assert TOTPDevice.objects.filter(confirmed=False).count() == 0


def test_the_django_admin_needs_the_second_factor():
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    client, _ = _password_step("root")
    assert client.get("/admin/")["Location"].startswith(SETUP)
    assert client.get("/admin/login/?next=/admin/")["Location"].startswith(SETUP)
    anonymous = Client().get("/admin/login/?next=/admin/accounts/user/")
    assert anonymous["Location"] == "/accounts/login/?next=%2Fadmin%2Faccounts%2Fuser%2F"
    client.post(SETUP, {"token": _token_from_setup_page(client, root)})
    assert client.get("/admin/").status_code == 200
    device = two_factor_device(root)  # support sees the devices, never their secret
    page = client.get(f"/admin/otp_totp/totpdevice/{device.pk}/change/")
    assert page.status_code == 200 and device.key not in page.content.decode()


# --- throttling and the API -------------------------------------------------------------------
def test_axes_still_locks_a_staff_username_out_before_any_token(settings):
    staff(User.StaffRole.APPROVER, username="sam")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        Client().post("/accounts/login/", {"username": "sam", "password": "wrong"}, REMOTE_ADDR="10.0.0.1")
    client, response = _password_step("sam", ip="10.0.0.2")
    assert response.status_code == 429 and "Too many failed log-ins" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert client.get(VERIFY)["Location"].startswith("/accounts/login/")


def test_an_api_key_works_for_an_organisation_that_requires_two_factor(people):
    Membership.objects.filter(user=people.rita).update(role=Membership.Role.RESELLER_ADMIN)
    two_factor_device(people.rita)
    two_factor.organisation_require_set(organisation=people.reseller, required=True, by=people.rita)
    issued = api_key_issue(organisation=people.reseller, name="ci")
    response = Client().get("/api/v1/orders", HTTP_AUTHORIZATION=f"Api-Key {issued.plaintext}")
    assert response.status_code == 200
    # A colleague past the password only, with the key in a script on the same browser profile:
    member_of(people.reseller, username="ron")
    half, _ = _password_step("ron")
    assert half.get("/orders/")["Location"].startswith(SETUP)
    assert half.get("/api/v1/orders").status_code in (401, 403)
    assert half.get("/api/v1/orders", HTTP_AUTHORIZATION=f"Api-Key {issued.plaintext}").status_code == 200


def test_a_session_without_its_second_factor_gets_nothing_from_the_api(people):
    client, _ = _password_step("sam")
    response = client.get("/api/v1/orders")
    assert response.status_code in (401, 403)
    assert response["Content-Type"].startswith("application/problem+json")


# --- an organisation's requirement, and anyone's choice -----------------------------------------
def test_an_admin_requires_it_on_the_organisation_page_and_members_then_enrol(login, people):
    Membership.objects.filter(user=people.alice).update(role=Membership.Role.ADMIN)
    member_of(people.acme, username="bob")
    client = login(people.alice)
    refused = client.post(f"/orgs/{people.acme.slug}/two-factor/", {"require_two_factor": "on"}, follow=True)
    assert "your own account first" in refused.content.decode()
    two_factor_device(people.alice)
    client = login(people.alice)  # signed in again, with the token this time
    page = client.post(f"/orgs/{people.acme.slug}/two-factor/", {"require_two_factor": "on"},
                       follow=True).content.decode()
    assert "now requires two-factor sign-in" in page and "no 2FA yet" in page
    bob, _ = _password_step("bob")
    assert bob.get("/orders/")["Location"].startswith(SETUP)
    charlie, _ = _password_step("charlie")  # another organisation: not asked
    assert charlie.get("/orders/").status_code == 200


def test_a_member_cannot_change_the_requirement_and_an_outsider_gets_404(login, people):
    client = login(people.alice)  # a plain member
    page = client.post(f"/orgs/{people.acme.slug}/two-factor/", {"require_two_factor": "on"},
                       follow=True).content.decode()
    assert "Only an admin" in page
    people.acme.refresh_from_db()
    assert not people.acme.require_two_factor
    assert login(people.charlie).post(f"/orgs/{people.acme.slug}/two-factor/",
                                      {"require_two_factor": "on"}).status_code == 404


def test_anyone_can_turn_it_on_and_off_with_a_current_token(login, people):
    client = login(people.alice)
    assert "Set up two-factor sign-in" in client.get("/account/").content.decode()
    client.post(SETUP, {"token": _token_from_setup_page(client, people.alice)})
    page = client.get("/account/two-factor/").content.decode()
    assert "10 of 10 left" in page and "Turn off" in page
    refused = client.post("/account/two-factor/disable", {"token": "000000"})
    assert refused.status_code == 400 and TOTPDevice.objects.filter(user=people.alice).exists()
    TOTPDevice.objects.update(throttling_failure_count=0, throttling_failure_timestamp=None)
    token = totp_token(two_factor_device(people.alice))
    assert client.post("/account/two-factor/disable", {"token": token})["Location"] == "/account/"
    assert not TOTPDevice.objects.filter(user=people.alice).exists()


def test_staff_see_no_way_to_turn_it_off(login, people):
    page = login(people.sam).get("/account/two-factor/").content.decode()
    assert "cannot be turned off" in page and "Turn off" not in page
    response = login(people.sam).post("/account/two-factor/disable",
                                      {"token": totp_token(two_factor_device(people.sam))})
    assert response.status_code == 302 and TOTPDevice.objects.filter(user=people.sam).exists()


def test_new_recovery_codes_from_the_account_page(login, people):
    client = login(people.sam)
    response = client.post("/account/two-factor/recovery-codes/new")
    assert response["Location"] == "/account/two-factor/recovery-codes/"
    page = client.get(response["Location"]).content.decode()
    codes = re.findall(r"<code>([a-z2-9]{5}-[a-z2-9]{5})</code>", page)
    assert len(codes) == 10 and two_factor.recovery_codes_left(people.sam) == 10


# --- the password-change e-mail -------------------------------------------------------------------
def test_changing_the_password_sends_an_email(login, people, monkeypatch, mailoutbox,
                                              django_capture_on_commit_callbacks):
    monkeypatch.setattr(security_notice_task, "delay", lambda *args: security_notice_task(*args))
    client = login(people.alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/accounts/password_change/", {
            "old_password": PASSWORD, "new_password1": "another-long-phrase-7",
            "new_password2": "another-long-phrase-7"})
    assert response.status_code == 302
    [message] = mailoutbox
    assert message.subject == "[Trainyard] Your password was changed" and message.to == [people.alice.email]
    assert "If this was not you" in message.body


def test_a_password_reset_sends_the_email_too(client, people, monkeypatch, mailoutbox,
                                              django_capture_on_commit_callbacks):
    monkeypatch.setattr(security_notice_task, "delay", lambda *args: security_notice_task(*args))
    client.post("/accounts/password_reset/", {"email": people.alice.email})
    link = re.search(r"/accounts/reset/\S+/", mailoutbox[0].body).group(0)
    form_url = client.get(link)["Location"]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(form_url, {"new_password1": "another-long-phrase-7",
                                          "new_password2": "another-long-phrase-7"})
    assert response.status_code == 302
    assert [m.subject for m in mailoutbox[1:]] == ["[Trainyard] Your password was changed"]
