"""Organisation admins invite members by e-mail, set roles and remove members; a reseller admin
does it for its customers; the invitation link creates a login or adds an existing one, works
once and expires; outsiders get 404; a removed member's keys leave the servers."""

import re
from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from portal.accounts import team, tokens
from portal.accounts.models import Invitation, Membership
from portal.accounts.tasks import invitation_send_task
from tests.factories import UserFactory, member_of, verified_login

PASSWORD = "a-long-passphrase-42"


@pytest.fixture
def admin(people):
    """alice as the admin of Acme AI."""
    Membership.objects.filter(user=people.alice).update(role=Membership.Role.ADMIN)
    return people.alice


@pytest.fixture
def mails_inline(monkeypatch):
    """Account e-mails queued on commit run in this process, as the worker would."""
    monkeypatch.setattr(invitation_send_task, "delay", lambda pk: invitation_send_task(pk))


def _link(message) -> str:
    return re.search(r"https?://\S+/account/invitations/\S+/", message.body).group(0)


def _path(link: str) -> str:
    return re.sub(r"^https?://[^/]+", "", link)


def _invite(client, org, email, role="member"):
    return client.post(f"/orgs/{org.slug}/members/invite/", {"email": email, "role": role})


# --- inviting ----------------------------------------------------------------------------------
def test_an_admin_invites_by_email_and_the_link_arrives_after_commit(
        login, people, admin, mails_inline, mailoutbox, django_capture_on_commit_callbacks, settings):
    settings.SITE_URL = "http://portal.example:8123"
    with django_capture_on_commit_callbacks(execute=True):
        response = _invite(login(admin), people.acme, "bob@example.org")
    assert response.status_code == 302 and response.url.endswith("#members")
    invitation = Invitation.objects.get()
    assert (invitation.email, invitation.role, invitation.invited_by) == (
        "bob@example.org", "member", admin)
    [message] = mailoutbox
    assert message.to == ["bob@example.org"] and "Join Acme AI" in message.subject
    assert _link(message).startswith("http://portal.example:8123/account/invitations/")
    assert invitation_send_task(invitation.pk) == 0  # a redelivered task sends nothing
    html = login(admin).get(f"/orgs/{people.acme.slug}/").content.decode()
    assert "Invited, not joined yet" in html and "bob@example.org" in html


def test_a_bad_address_or_a_member_is_an_inline_error(login, people, admin):
    client = login(admin)
    response = _invite(client, people.acme, "not-an-address")
    assert response.status_code == 400 and "Enter a valid email address." in response.content.decode()
    response = _invite(client, people.acme, people.alice.email)
    assert "is already a member of Acme AI" in response.content.decode()
    assert not Invitation.objects.exists()


def test_a_plain_member_cannot_invite_and_sees_no_invite_form(login, people):
    client = login(people.alice)  # a customer member, not an admin
    assert "Send invitation" not in client.get(f"/orgs/{people.acme.slug}/").content.decode()
    response = _invite(client, people.acme, "bob@example.org")
    assert response.status_code == 302 and not Invitation.objects.exists()


def test_an_outsider_gets_404_on_every_team_url(login, people, admin):
    membership = Membership.objects.get(user=admin)
    invitation = team.invitation_create(organisation=people.acme, email="x@example.org", by=admin)
    client = login(people.charlie)
    base = f"/orgs/{people.acme.slug}"
    for url in (f"{base}/members/invite/", f"{base}/members/{membership.pk}/role/",
                f"{base}/members/{membership.pk}/remove/",
                f"{base}/invitations/{invitation.reference}/revoke/"):
        assert client.post(url, {"email": "a@b.c", "role": "admin", "confirm": "yes"}).status_code == 404
    membership.refresh_from_db()
    assert membership.role == "admin" and Membership.objects.filter(pk=membership.pk).exists()


def test_a_reseller_admin_invites_to_its_customer_organisation(login, people, mails_inline,
                                                               mailoutbox,
                                                               django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = _invite(login(people.rita), people.client_org, "carol@example.org", role="admin")
    assert response.status_code == 302
    invitation = Invitation.objects.get(organisation=people.client_org)
    assert invitation.role == "admin" and "rita invites you to join Resale Client" in mailoutbox[0].body


# --- accepting ---------------------------------------------------------------------------------
def test_a_new_person_creates_a_login_from_the_link_and_joins(client, people, admin):
    invitation = team.invitation_create(organisation=people.acme, email="bob@example.org", by=admin)
    path = f"/account/invitations/{tokens.invitation_token(invitation)}/"
    page = client.get(path).content.decode()
    assert "Join Acme AI" in page and "Create your login" in page
    bad = client.post(path, {"username": "bob", "password": PASSWORD, "password_again": "other"})
    assert bad.status_code == 400 and "The two passwords differ" in bad.content.decode()
    response = client.post(path, {"username": "bob", "first_name": "Bob", "password": PASSWORD,
                                  "password_again": PASSWORD})
    assert response.status_code == 302 and response.url == f"/orgs/{people.acme.slug}/"
    membership = Membership.objects.get(organisation=people.acme, user__username="bob")
    assert membership.user.email == "bob@example.org" and membership.role == "member"
    assert client.get("/orders/").status_code == 200  # logged in
    again = client.get(path)
    assert again.status_code == 410 and "already accepted" in again.content.decode()


def test_an_existing_user_logs_in_and_joins(login, client, people, admin):
    dave = UserFactory(username="dave", email="dave@example.org")
    invitation = team.invitation_create(organisation=people.acme, email="DAVE@example.org",
                                        role="admin", by=admin)
    path = f"/account/invitations/{tokens.invitation_token(invitation)}/"
    html = client.get(path).content.decode()
    assert "Log in to accept" in html and "Create your login" not in html
    response = login(dave).post(path)
    assert response.status_code == 302
    assert Membership.objects.get(user=dave, organisation=people.acme).role == "admin"


def test_only_the_invited_address_can_accept(login, client, people, admin):
    """Issue 28: any signed-in account could accept a link it got hold of. The page says whose
    invitation it is and offers to log out; a POST is refused and the invitation stays open."""
    invitation = team.invitation_create(organisation=people.acme, email="Bob@Example.org", by=admin)
    path = f"/account/invitations/{tokens.invitation_token(invitation)}/"
    charlie = login(people.charlie)  # charlie@example.com, a member of another organisation
    page = charlie.get(path)
    html = page.content.decode()
    assert page.status_code == 200
    assert "This invitation is for Bob@Example.org; you are signed in as charlie" in html
    assert "Log out and open this invitation again" in html and ">Join Acme AI</button>" not in html
    refused = charlie.post(path)
    assert refused.status_code == 403 and "This invitation is for Bob@Example.org" in refused.content.decode()
    assert not Membership.objects.filter(user=people.charlie, organisation=people.acme).exists()
    invitation.refresh_from_db()
    assert invitation.accepted_at is None
    with pytest.raises(PermissionDenied):
        team.invitation_accept(invitation=invitation, user=people.charlie)
    charlie.post("/accounts/logout/", {"next": path})
    bob = UserFactory(username="bob", email="bob@example.org")  # the invited address, any case
    assert login(bob).post(path).status_code == 302
    assert Membership.objects.filter(user=bob, organisation=people.acme).exists()


@pytest.mark.parametrize("spoil", ["expired", "revoked", "tampered"])
def test_an_expired_withdrawn_or_forged_link_says_so(client, people, admin, spoil):
    invitation = team.invitation_create(organisation=people.acme, email="bob@example.org", by=admin)
    token = tokens.invitation_token(invitation)
    if spoil == "expired":
        Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - timedelta(1))
    elif spoil == "revoked":
        login_client = client
        verified_login(login_client, admin)
        login_client.post(f"/orgs/{people.acme.slug}/invitations/{invitation.reference}/revoke/")
        login_client.logout()
    else:
        token = token[:-3] + ("aaa" if not token.endswith("aaa") else "bbb")
    response = client.post(f"/account/invitations/{token}/",
                           {"username": "bob", "password": PASSWORD, "password_again": PASSWORD})
    text = response.content.decode()
    assert response.status_code in (404, 410)
    assert {"expired": "expired on", "revoked": "was withdrawn", "tampered": "not valid"}[spoil] in text
    assert not Membership.objects.filter(user__username="bob").exists()


def test_a_new_invitation_of_the_same_address_replaces_the_old_link(people, admin):
    first = team.invitation_create(organisation=people.acme, email="bob@example.org", by=admin)
    team.invitation_create(organisation=people.acme, email="bob@example.org", by=admin)
    first.refresh_from_db()
    assert first.revoked_at is not None and team.pending(people.acme).count() == 1


# --- roles and removal -------------------------------------------------------------------------
def test_an_admin_sets_roles_but_never_removes_the_last_admin(login, people, admin):
    bob = member_of(people.acme, username="bob")
    client = login(admin)
    bob_membership = Membership.objects.get(user=bob)
    client.post(f"/orgs/{people.acme.slug}/members/{bob_membership.pk}/role/", {"role": "admin"})
    bob_membership.refresh_from_db()
    assert bob_membership.role == "admin"
    client.post(f"/orgs/{people.acme.slug}/members/{bob_membership.pk}/role/", {"role": "member"})
    mine = Membership.objects.get(user=admin)
    response = client.post(f"/orgs/{people.acme.slug}/members/{mine.pk}/role/", {"role": "member"},
                           follow=True)
    assert "is the last admin of Acme AI" in response.content.decode()
    mine.refresh_from_db()
    assert mine.role == "admin"
    response = client.post(f"/orgs/{people.acme.slug}/members/{mine.pk}/remove/",
                           {"confirm": "yes"}, follow=True)
    assert "is the last admin of Acme AI" in response.content.decode()
    reseller_roles = dict(team.roles_for(people.reseller))
    assert "reseller_admin" in reseller_roles and "admin" not in reseller_roles


def test_removing_a_member_needs_a_confirmation(login, people, admin):
    bob = member_of(people.acme, username="bob")
    membership = Membership.objects.get(user=bob)
    client = login(admin)
    response = client.post(f"/orgs/{people.acme.slug}/members/{membership.pk}/remove/", follow=True)
    assert "Nobody was removed: confirm it first." in response.content.decode()
    response = client.post(f"/orgs/{people.acme.slug}/members/{membership.pk}/remove/",
                           {"confirm": "yes"}, follow=True)
    assert "bob was removed from Acme AI" in response.content.decode()
    assert not Membership.objects.filter(user=bob).exists()
    assert login(bob).get(f"/orgs/{people.acme.slug}/").status_code == 404


def test_the_members_card_shows_roles_invitations_and_the_invite_form(login, people, admin):
    team.invitation_create(organisation=people.acme, email="eve@example.org", by=admin)
    html = login(admin).get(f"/orgs/{people.acme.slug}/").content.decode()
    assert 'id="members"' in html and "Send invitation" in html and "Remove…" in html
    assert "eve@example.org" in html and "Withdraw" in html
    assert '<option value="admin" selected>Organisation admin</option>' in html
