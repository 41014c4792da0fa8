"""A reseller's plain member does not see the reseller's customers; its admin does."""

from portal.accounts.models import Organisation
from tests.factories import member_of


def test_a_plain_reseller_member_sees_no_child_organisations(people, login):
    plain = member_of(people.reseller, username="ron")
    html = login(plain).get(f"/orgs/{people.reseller.slug}/").content.decode()
    assert "Resale Client" not in html
    assert login(plain).get(f"/orgs/{people.client_org.slug}/").status_code == 404


def test_the_reseller_admin_sees_and_opens_them(people, login):
    html = login(people.rita).get(f"/orgs/{people.reseller.slug}/").content.decode()
    assert "Resale Client" in html
    assert login(people.rita).get(f"/orgs/{people.client_org.slug}/").status_code == 200
    assert Organisation.objects.filter(parent=people.reseller).count() == 1
