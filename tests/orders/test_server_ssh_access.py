"""The server page's access card: ssh line per node with its rank, the installed keys by name
and fingerprint, where to manage them, the environment file; no promise of a key nobody gave."""

from portal.orders.states import OrderState
from provisioning.fulfilment.ssh_keys import ssh_key_add
from provisioning.models import ProvisioningRun
from provisioning.states import RunKind
from tests.accounts.ssh_keygen import new_public_key
from tests.factories import H100_SKU, approved_order, drain, make_node


def _html(client, order) -> str:
    return client.get(f"/orders/{order.reference}/server/").content.decode()


def test_without_a_key_the_page_says_so_and_links_to_add_one(login, people, active):
    html = _html(login(people.alice), active)
    assert "No SSH key yet, so nobody can log in" in html
    assert 'href="/orgs/acme-ai/#ssh-keys"' in html and 'href="/account/ssh-keys/"' in html
    assert "/etc/trainyard/env.sh" in html
    assert "Log in with the SSH key of your organisation" not in html


def test_installed_keys_are_listed_by_name_and_fingerprint(login, people, active):
    key = ssh_key_add(public_key=new_public_key(), name="alice laptop", user=people.alice)
    html = _html(login(people.alice), active)
    assert "Your keys are being installed" in html  # the sync run has not run yet
    drain(ProvisioningRun.objects.get(order=active, kind=RunKind.SYNC_KEYS).pk)
    html = _html(login(people.alice), active)
    assert "alice laptop" in html and key.fingerprint in html and "No SSH key yet" not in html
    assert "Recent key changes" not in html
    ssh_key_add(public_key=new_public_key(), name="second", user=people.alice)
    html = _html(login(people.alice), active)
    assert "Recent key changes are not on the server yet" in html and "second" not in html


def test_a_cluster_lists_every_node_with_its_rank(login, people, catalog, sim_dir):
    for name in ("gpu-b02", "gpu-b01"):
        make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="f1", hostname=name)
    order = approved_order(people, node_count=2)
    drain(order.runs.get().pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    html = _html(login(people.alice), order)
    assert html.index("gpu-b01") < html.index("rank 0") < html.index("gpu-b02") < html.index("rank 1")


def test_an_outsider_gets_404(login, people, active):
    assert login(people.charlie).get(f"/orders/{active.reference}/server/").status_code == 404
