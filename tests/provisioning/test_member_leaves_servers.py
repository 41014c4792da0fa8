"""When a member leaves an organisation (an admin removes them, or staff deactivate the
account), a key sync runs on the organisation's active servers after the commit, and the
person's own keys are gone from them. Accounts tells provisioning through the signal it
declares (``portal.accounts.signals.members_left``); it imports nothing above it."""

from django.contrib.auth import get_user_model

from portal.accounts import team
from portal.accounts.models import Membership
from provisioning.fulfilment.ssh_keys import installed_keys, ssh_key_add
from tests.accounts.ssh_keygen import new_public_key
from tests.factories import MembershipFactory, drain, verified_login
from tests.provisioning.test_ssh_keys_sync import _sync_runs, active_order  # noqa: F401


def _bob_with_a_key_on_the_server(people, order):
    bob = MembershipFactory(organisation=people.acme).user
    ssh_key_add(public_key=new_public_key(), name="bob laptop", user=bob)
    drain(_sync_runs(order).last().pk)
    assert [k.name for k in installed_keys(order).keys] == ["bob laptop"]
    return bob


def test_removing_a_member_takes_their_keys_off_the_servers(people, active_order,  # noqa: F811
                                                            login,
                                                            django_capture_on_commit_callbacks):
    Membership.objects.filter(user=people.alice).update(role=Membership.Role.ADMIN)
    bob = _bob_with_a_key_on_the_server(people, active_order)
    before = _sync_runs(active_order).count()
    membership = Membership.objects.get(user=bob)
    with django_capture_on_commit_callbacks() as queued:
        login(people.alice).post(f"/orgs/{people.acme.slug}/members/{membership.pk}/remove/",
                                 {"confirm": "yes"})
    assert _sync_runs(active_order).count() == before + 1 and len(queued) == 1  # after commit
    drain(_sync_runs(active_order).last().pk)
    assert [k.name for k in installed_keys(active_order).keys] == []


def test_deactivating_an_account_takes_its_keys_off_the_servers(people, active_order):  # noqa: F811
    bob = _bob_with_a_key_on_the_server(people, active_order)
    team.user_deactivate(user=bob, by=people.sam)
    assert not get_user_model().objects.get(pk=bob.pk).is_active
    drain(_sync_runs(active_order).last().pk)
    assert [k.name for k in installed_keys(active_order).keys] == []


def test_staff_deactivating_in_the_admin_takes_the_keys_off_too(people, active_order,  # noqa: F811
                                                                client):
    bob = _bob_with_a_key_on_the_server(people, active_order)
    before = _sync_runs(active_order).count()
    people.olga.is_superuser = True
    people.olga.save()
    verified_login(client, people.olga)
    response = client.post("/admin/accounts/user/", {"action": "deactivate",
                                                      "_selected_action": [bob.pk]})
    assert response.status_code == 302
    assert not get_user_model().objects.get(pk=bob.pk).is_active
    assert _sync_runs(active_order).count() == before + 1
