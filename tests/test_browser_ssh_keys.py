"""In real Chromium: a customer adds a key on their SSH keys page (htmx, an inline error for a
private key first), an organisation key on the organisation page, sees them on the server page
of an active cluster once the sync run has installed them, and removes one. No console errors,
no sideways scroll at 390 px; screenshots at both widths go to /tmp/shots/."""

import pytest
from playwright.sync_api import expect

from portal.accounts.models import SSHKey
from provisioning.models import ProvisioningRun
from provisioning.states import RunKind
from tests.accounts.ssh_keygen import new_public_key, private_key, private_text
from tests.browser_login import log_in
from tests.factories import H100_SKU, OrganisationFactory, approved_order, drain, make_node, member_of, staff
from tests.test_browser_storage import _shoot


@pytest.mark.browser
def test_keys_are_added_seen_on_the_server_page_and_removed(live_server, page, catalog, tmp_path):
    errors = []
    # The site has no favicon yet (not this page's): every other console error counts.
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" and not
            msg.location.get("url", "").endswith("/favicon.ico") else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    acme = OrganisationFactory(name="Acme AI", slug="acme-ai")
    alice = member_of(acme, username="alice")
    people = type("People", (), {"acme": acme, "alice": alice, "sam": staff("approver")})
    for name in ("gpu-h100-b01", "gpu-h100-b02"):
        make_node(sku=H100_SKU, state_dir=tmp_path, fabric_group="f1", hostname=name)
    order = approved_order(people, node_count=2)
    drain(order.runs.get().pk)
    base = live_server.url
    log_in(page, base, "alice")

    page.goto(f"{base}/orders/{order.reference}/server/")
    expect(page.get_by_text("No SSH key yet, so nobody can log in")).to_be_visible()
    page.get_by_role("link", name="SSH keys", exact=True).click()
    page.get_by_label("Public key").fill(private_text(private_key("ssh-ed25519")))
    page.get_by_role("button", name="Add key").click()
    expect(page.get_by_text("This is a private key")).to_be_visible()
    assert not SSHKey.objects.exists()
    page.get_by_label("Public key").fill(new_public_key(comment="alice@laptop"))
    page.get_by_role("button", name="Add key").click()
    expect(page.get_by_text("Key “alice@laptop” added")).to_be_visible()
    personal = SSHKey.objects.get(user=alice)
    expect(page.locator("#ssh-keys table")).to_contain_text(personal.fingerprint)
    _shoot(page, "ssh-keys-personal")

    page.goto(f"{base}/orgs/acme-ai/")
    page.get_by_label("Public key").fill(new_public_key(comment=""))
    page.locator("#ssh_key_name").fill("shared CI")
    page.get_by_role("button", name="Add key").click()
    expect(page.locator("#ssh-keys table")).to_contain_text("shared CI")
    _shoot(page, "ssh-keys-organisation")

    for run in ProvisioningRun.objects.filter(kind=RunKind.SYNC_KEYS).order_by("pk"):
        drain(run.pk)  # what the workers do after each commit
    page.goto(f"{base}/orders/{order.reference}/server/")
    expect(page.locator("#installed-keys + ul")).to_contain_text("alice@laptop")
    expect(page.locator("#installed-keys + ul")).to_contain_text("shared CI")
    _shoot(page, "ssh-keys-server")

    page.goto(f"{base}/account/ssh-keys/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Remove alice@laptop").click()
    expect(page.get_by_text("No SSH keys yet.")).to_be_visible()
    assert not SSHKey.objects.filter(user=alice).exists()
    assert errors == []
