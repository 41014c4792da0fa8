import re

from portal.accounts.models import ApiKey, Membership
from portal.accounts.selectors import organisations_for
from portal.accounts.services import api_key_issue
from tests.factories import MembershipFactory, OrganisationFactory, member_of, staff


def test_member_sees_own_org_and_gets_404_for_another(login, db):
    acme, other = OrganisationFactory(slug="acme"), OrganisationFactory(slug="other")
    client = login(member_of(acme))
    assert client.get("/orgs/acme/").status_code == 200
    assert client.get("/orgs/other/").status_code == 404
    assert client.post("/orgs/other/", {"name": "steal"}).status_code == 404
    assert not ApiKey.objects.filter(organisation=other).exists()


def test_reseller_admin_sees_its_customers_but_not_others(db):
    reseller = OrganisationFactory(kind="reseller")
    child = OrganisationFactory(parent=reseller)
    stranger = OrganisationFactory()
    admin = MembershipFactory(organisation=reseller, role=Membership.Role.RESELLER_ADMIN).user
    assert set(organisations_for(admin)) == {reseller, child}
    assert stranger not in organisations_for(admin)
    assert set(organisations_for(staff("approver"))) == {reseller, child, stranger}


def test_member_creates_a_key_shown_once_then_revokes_it(login, db):
    acme = OrganisationFactory(slug="acme")
    client = login(member_of(acme))
    response = client.post("/orgs/acme/", {"name": "training bot", "scopes": ["read", "write"]},
                           follow=True)
    key = ApiKey.objects.get(organisation=acme)
    assert key.scopes == ["read", "write"]
    assert response.redirect_chain == [("/orgs/acme/#new-api-key", 302)]  # post/redirect/get
    assert f"ty_{key.prefix}_" in response.content.decode()
    assert f"ty_{key.prefix}_" not in client.get("/orgs/acme/").content.decode()
    assert ApiKey.objects.filter(organisation=acme).count() == 1  # a reload creates no second key
    assert "you" in client.get("/orgs/acme/").content.decode()  # created by
    client.post(f"/orgs/acme/keys/{key.prefix}/revoke")  # not confirmed: nothing happens
    key.refresh_from_db()
    assert key.revoked_at is None
    response = client.post(f"/orgs/acme/keys/{key.prefix}/revoke", {"confirm": "yes"}, follow=True)
    assert "revoked. Requests with it now fail." in response.content.decode()
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_blank_key_name_gets_an_inline_error(login, db):
    acme = OrganisationFactory(slug="acme")
    response = login(member_of(acme)).post("/orgs/acme/", {"name": ""})
    assert "This field is required." in response.content.decode()
    assert not ApiKey.objects.exists()


def test_anonymous_is_sent_to_login(client, db):
    OrganisationFactory(slug="acme")
    response = client.get("/orgs/acme/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_an_outsider_gets_404_revoking_another_organisations_key(login, db):
    acme, other = OrganisationFactory(slug="acme"), OrganisationFactory(slug="other")
    key = api_key_issue(organisation=other, name="their bot").api_key
    client = login(member_of(acme))
    assert client.post(f"/orgs/other/keys/{key.prefix}/revoke").status_code == 404
    # nor through its own organisation's URL
    assert client.post(f"/orgs/acme/keys/{key.prefix}/revoke").status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None


def test_a_member_who_cannot_manage_keys_is_told_so_and_gets_no_key(login, db):
    reseller = OrganisationFactory(slug="resale", kind="reseller")
    member = MembershipFactory(organisation=reseller, role=Membership.Role.MEMBER).user
    response = login(member).post("/orgs/resale/", {"name": "sneaky bot"})
    assert response.status_code == 403
    assert "Only an admin of this organisation can create API keys" in response.content.decode()
    assert not ApiKey.objects.filter(organisation=reseller).exists()


def test_the_page_that_shows_a_new_key_is_never_cached(login, db):
    acme = OrganisationFactory(slug="acme")
    client = login(member_of(acme))
    created = client.post("/orgs/acme/", {"name": "bot", "scopes": ["read"]}, follow=True)
    for response in (client.get("/orgs/acme/"), created):
        assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]


def test_a_key_is_created_read_only_when_only_read_is_chosen(login, db):
    acme = OrganisationFactory(slug="acme")
    login(member_of(acme)).post("/orgs/acme/", {"name": "dashboard", "scopes": ["read"]})
    assert ApiKey.objects.get(organisation=acme).scopes == ["read"]


def test_a_key_needs_a_scope(login, db):
    acme = OrganisationFactory(slug="acme")
    response = login(member_of(acme)).post("/orgs/acme/", {"name": "dashboard"})
    assert "This field is required." in response.content.decode()
    assert not ApiKey.objects.exists()


def test_a_new_key_is_offered_read_only_and_kept_out_of_the_session_in_clear(login, db):
    acme = OrganisationFactory(slug="acme")
    client = login(member_of(acme))
    page = client.get("/orgs/acme/").content.decode()
    boxes = {re.search(r'value="(\w+)"', tag).group(1): "checked" in tag
             for tag in re.findall(r'<input type="checkbox" name="scopes"[^>]*>', page)}
    assert boxes == {"read": True, "write": False}
    client.post("/orgs/acme/", {"name": "bot", "scopes": ["read"]})
    key = ApiKey.objects.get(organisation=acme)
    stored = client.session.get("accounts.new_api_key")
    assert stored and f"ty_{key.prefix}_" not in stored  # encrypted until the page shows it
