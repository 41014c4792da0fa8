"""The SSH key pages: a person's own keys (/account/ssh-keys/) and an organisation's keys (on its
page). Who may manage what, and that an outsider sees nothing (404)."""

import pytest

from portal.accounts.models import Membership, SSHKey
from portal.accounts.services import ssh_key_add
from tests.accounts.ssh_keygen import new_public_key, private_key, private_text
from tests.factories import MembershipFactory, OrganisationFactory, member_of

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_a_person_adds_a_key_and_sees_its_fingerprint_then_removes_it(login, people):
    client = login(people.alice)
    response = client.post("/account/ssh-keys/", {"public_key": new_public_key(), "name": "laptop"},
                           follow=True)
    key = SSHKey.objects.get(user=people.alice)
    html = response.content.decode()
    assert key.organisation is None and key.created_by == people.alice
    assert "laptop" in html and key.fingerprint in html and "Ed25519" in html
    response = client.post(f"/account/ssh-keys/{key.pk}/remove", follow=True)
    assert not SSHKey.objects.filter(pk=key.pk).exists()
    assert "removed" in response.content.decode()


def test_htmx_answers_the_card_alone_with_the_new_key(login, people):
    response = login(people.alice).post("/account/ssh-keys/", {"public_key": new_public_key()},
                                        **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<section class="card ssh-keys" id="ssh-keys"')
    assert "<html" not in html and "added" in html
    assert SSHKey.objects.get(user=people.alice).fingerprint in html


def test_bad_input_is_shown_inline_and_the_pasted_text_is_kept(login, people):
    pasted = "ssh-rsa AAAAbroken"
    response = login(people.alice).post("/account/ssh-keys/", {"public_key": pasted, "name": "x"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "The key data is damaged or incomplete" in html
    assert pasted in html  # nothing to type again
    assert not SSHKey.objects.exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_a_pasted_private_key_is_refused_and_never_shown_again(login, people, htmx):
    """Issue 28: it was refused but echoed back in the re-rendered form."""
    secret = private_text(private_key("ssh-ed25519"))
    body = secret.splitlines()[2]  # a line of the key's base64, not its armour
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    client = login(people.alice)
    for url, data in (("/account/ssh-keys/", {"public_key": secret, "name": "x"}),
                      ("/account/ssh-keys/", {"public_key": new_public_key(), "name": secret}),
                      (f"/orgs/{people.acme.slug}/ssh-keys/", {"public_key": secret})):
        html = client.post(url, data, **headers).content.decode()
        assert "private key" in html and "treat this private key as exposed" in html, html[:3000]
        assert body not in html and "PRIVATE KEY" not in html
    assert not SSHKey.objects.exists()


def test_two_keys_on_one_line_are_refused_on_the_pages(login, people):
    client = login(people.alice)
    two = f"{new_public_key()} {new_public_key()}"
    for url in ("/account/ssh-keys/", f"/orgs/{people.acme.slug}/ssh-keys/"):
        response = client.post(url, {"public_key": two})
        assert response.status_code == 400 and "more than one key" in response.content.decode()
    assert not SSHKey.objects.exists()


def test_a_person_cannot_remove_someone_elses_key(login, people):
    key = ssh_key_add(public_key=new_public_key(), user=people.charlie)
    assert login(people.alice).post(f"/account/ssh-keys/{key.pk}/remove").status_code == 404
    assert SSHKey.objects.filter(pk=key.pk).exists()
    assert key.fingerprint not in login(people.alice).get("/account/ssh-keys/").content.decode()


def test_a_member_manages_the_organisations_keys_on_its_page(login, people):
    client = login(people.alice)
    client.post("/orgs/acme-ai/ssh-keys/", {"public_key": new_public_key(), "name": "shared CI"})
    key = SSHKey.objects.get(organisation=people.acme)
    html = client.get("/orgs/acme-ai/").content.decode()
    assert 'id="ssh-keys"' in html and "shared CI" in html and key.fingerprint in html
    assert f"/orgs/acme-ai/ssh-keys/{key.pk}/remove" in html
    response = client.post(f"/orgs/acme-ai/ssh-keys/{key.pk}/remove", **HTMX)
    assert response.status_code == 200 and "No SSH keys yet." in response.content.decode()
    assert not SSHKey.objects.filter(organisation=people.acme).exists()


def test_a_reseller_admin_manages_its_customers_keys(login, people):
    client = login(people.rita)
    client.post("/orgs/resale-client/ssh-keys/", {"public_key": new_public_key()})
    assert SSHKey.objects.filter(organisation=people.client_org).count() == 1


def test_a_non_admin_cannot_manage_the_organisations_keys(login, people):
    member = MembershipFactory(organisation=people.reseller, role=Membership.Role.MEMBER).user
    key = ssh_key_add(public_key=new_public_key(), organisation=people.reseller)
    client = login(member)
    html = client.get("/orgs/gpu-resale/").content.decode()
    assert key.fingerprint in html  # a member sees the keys …
    assert "Add key" not in html and f"/ssh-keys/{key.pk}/remove" not in html  # … not the buttons
    response = client.post("/orgs/gpu-resale/ssh-keys/", {"public_key": new_public_key()})
    assert response.status_code == 403
    assert "Only an admin of this organisation can add its SSH keys" in response.content.decode()
    assert client.post(f"/orgs/gpu-resale/ssh-keys/{key.pk}/remove").status_code == 403
    assert list(SSHKey.objects.filter(organisation=people.reseller)) == [key]


def test_another_organisation_cannot_see_or_touch_the_keys(login, people):
    key = ssh_key_add(public_key=new_public_key(), organisation=people.acme)
    client = login(people.charlie)
    assert client.get("/orgs/acme-ai/ssh-keys/").status_code == 404
    assert client.post("/orgs/acme-ai/ssh-keys/", {"public_key": new_public_key()}).status_code == 404
    assert client.post(f"/orgs/acme-ai/ssh-keys/{key.pk}/remove").status_code == 404
    # nor through its own organisation's URL
    assert client.post(f"/orgs/other-lab/ssh-keys/{key.pk}/remove").status_code == 404
    assert list(SSHKey.objects.all()) == [key]


def test_a_duplicate_in_the_organisation_says_where_the_first_is(login, db):
    org = OrganisationFactory(slug="lab")
    line = new_public_key()
    ssh_key_add(public_key=line, name="first", organisation=org)
    response = login(member_of(org)).post("/orgs/lab/ssh-keys/", {"public_key": line}, **HTMX)
    assert "already added as “first”" in response.content.decode()
    assert SSHKey.objects.filter(organisation=org).count() == 1


def test_anonymous_is_sent_to_login(client, db):
    assert "/accounts/login/" in client.get("/account/ssh-keys/")["Location"]
