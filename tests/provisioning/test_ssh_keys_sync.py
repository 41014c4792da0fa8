"""Which keys a server gets (the organisation's and its members' own), and the day-2 sync_keys
run that a key added or removed while a server is active queues after the commit."""

import pytest
from django.core import mail

from portal.accounts.models import Membership
from portal.orders.models import OrderEvent
from portal.orders.notifications import order_event_notify
from portal.orders.states import OrderState
from provisioning.fulfilment.ssh_keys import installed_keys, order_ssh_keys, ssh_key_add, ssh_key_remove
from provisioning.models import ProvisioningRun, StepRun
from provisioning.pipeline.steps.access import AccessResult
from provisioning.states import RunKind, RunStatus
from tests.accounts.ssh_keygen import new_public_key
from tests.factories import H100_SKU, MembershipFactory, approved_order, drain, make_node
from tests.provisioning.test_tasks_worker import wait_for


@pytest.fixture
def active_order(people, catalog, sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-sync-01")
    order = approved_order(people)
    drain(order.runs.get().pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    return order


def _sync_runs(order):
    return ProvisioningRun.objects.filter(order=order, kind=RunKind.SYNC_KEYS).order_by("pk")


def test_a_server_gets_the_organisations_and_its_members_keys_once(people, catalog, sim_dir):
    org_key = ssh_key_add(public_key=new_public_key(), name="shared", organisation=people.acme)
    line = new_public_key()
    ssh_key_add(public_key=line, name="alice laptop", user=people.alice)
    ssh_key_add(public_key=line, name="same key, org", organisation=people.acme)  # installed once
    ssh_key_add(public_key=new_public_key(), name="charlie", user=people.charlie)  # not a member
    ssh_key_add(public_key=new_public_key(), name="other org", organisation=people.outsider_org)
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)

    step = StepRun.objects.get(run__order=order, step="access")
    result = AccessResult.from_dict(step.result)
    assert result.key_count == 2
    assert [(k.name, k.owner) for k in result.keys] == [("shared", "organisation"),
                                                        ("alice laptop", people.alice.username)]
    assert result.fingerprints[0] == org_key.fingerprint
    assert "AAAA" not in str(step.result)  # fingerprints only, no key material
    log = list(step.log_lines.values_list("text", flat=True))
    assert f"2 SSH key(s) installed for {result.login_user}" in log
    assert f"key shared: {org_key.fingerprint}" in log


def test_adding_a_key_to_an_active_server_queues_a_sync_after_the_commit(
        people, active_order, django_capture_on_commit_callbacks, monkeypatch):
    queued = []
    monkeypatch.setattr("provisioning.tasks.run_start_task.delay", queued.append)
    assert installed_keys(active_order).key_count == 0
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        key = ssh_key_add(public_key=new_public_key(), name="new", organisation=people.acme,
                          by=people.alice)
        assert queued == []  # nothing leaves before the commit
    run = _sync_runs(active_order).get()
    assert len(callbacks) == 1 and queued == [run.pk]
    assert run.status == RunStatus.PENDING and run.created_by == people.alice
    assert list(run.steps.values_list("step", flat=True)) == ["access"]  # on its one node

    drain(run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    active_order.refresh_from_db()
    assert active_order.state == OrderState.ACTIVE  # a day-2 run leaves the order as it is
    assert installed_keys(active_order).fingerprints == (key.fingerprint,)
    assert order_ssh_keys(active_order).in_sync

    ssh_key_remove(ssh_key=key, by=people.alice)
    assert not order_ssh_keys(active_order).in_sync  # until the new run has installed it
    drain(_sync_runs(active_order).last().pk)
    assert installed_keys(active_order).key_count == 0


def test_a_members_personal_key_reaches_the_servers_of_each_of_its_organisations(
        people, active_order):
    ssh_key_add(public_key=new_public_key(), user=people.alice)
    assert _sync_runs(active_order).count() == 1
    ssh_key_add(public_key=new_public_key(), user=people.charlie)  # another organisation's member
    ssh_key_add(public_key=new_public_key(), organisation=people.outsider_org)
    assert _sync_runs(active_order).count() == 1


def test_a_key_added_before_any_server_is_active_queues_nothing(people, catalog):
    ssh_key_add(public_key=new_public_key(), organisation=people.acme)
    assert not ProvisioningRun.objects.filter(kind=RunKind.SYNC_KEYS).exists()


def test_a_member_who_leaves_loses_access_at_the_next_sync(people, active_order):
    bob = MembershipFactory(organisation=people.acme).user
    ssh_key_add(public_key=new_public_key(), name="bob", user=bob)
    drain(_sync_runs(active_order).last().pk)
    assert [k.name for k in installed_keys(active_order).keys] == ["bob"]
    Membership.objects.filter(user=bob).delete()
    assert not order_ssh_keys(active_order).in_sync


def test_the_active_email_says_how_to_log_in_and_which_keys_work(people, active_order):
    event = OrderEvent.objects.get(order=active_order, to_state="active")
    mail.outbox.clear()
    order_event_notify(event_id=event.pk)
    body = mail.outbox[-1].body
    assert "How to log in:" in body and "gpu-sync-01: a simulated node" in body
    assert "No SSH key is installed yet, so nobody can log in" in body
    assert "/orgs/acme-ai/#ssh-keys" in body and "/account/ssh-keys/" in body
    assert "/etc/trainyard/env.sh" in body
    assert "SSH key of your organisation" not in body

    key = ssh_key_add(public_key=new_public_key(), name="ci", organisation=people.acme)
    drain(_sync_runs(active_order).last().pk)
    order_event_notify(event_id=event.pk)
    body = mail.outbox[-1].body
    assert f"  ci: {key.fingerprint}" in body and "No SSH key is installed yet" not in body


def test_other_emails_carry_no_access_lines(people, active_order):
    event = OrderEvent.objects.filter(order=active_order, to_state="approved").first()
    mail.outbox.clear()
    order_event_notify(event_id=event.pk)
    assert "How to log in" not in mail.outbox[-1].body


@pytest.mark.celery_worker
@pytest.mark.usefixtures("require_postgres")
def test_a_real_worker_installs_a_key_added_through_the_page(
        celery_worker_process, login, people, catalog, sim_dir):
    """The page answers at once; the worker runs the sync run it queued after the commit."""
    make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-sync-w1")
    order = approved_order(people)
    drain(order.runs.get().pk)
    response = login(people.alice).post("/orgs/acme-ai/ssh-keys/", {"public_key": new_public_key(),
                                                                    "name": "from the page"})
    assert response.status_code == 302
    run = _sync_runs(order).get()
    wait_for(lambda: ProvisioningRun.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED,
             worker=celery_worker_process, what="the sync_keys run to succeed")
    assert [k.name for k in installed_keys(order).keys] == ["from the page"]
