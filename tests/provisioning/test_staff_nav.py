"""The Admin link shows only to those who can use Django's admin."""

from django.contrib.auth.models import Permission

from tests.factories import UserFactory


def test_staff_without_admin_permissions_see_no_admin_link(people, login):
    assert ">Admin<" not in login(people.sam).get("/ops/approvals/").content.decode()
    assert ">Admin<" not in login(people.alice).get("/orders/").content.decode()


def test_a_superuser_and_staff_with_permissions_see_it(people, login):
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    assert ">Admin<" in login(root).get("/orders/").content.decode()
    people.olga.user_permissions.add(Permission.objects.get(codename="view_serversku"))
    assert ">Admin<" in login(people.olga).get("/ops/nodes/").content.decode()
