"""In real Chromium: wizard → configurator with the plan's default bucket → quote → order → staff
approve → a real Celery worker provisions it (the bucket on the loopback S3) → the server page
shows the bucket and reveals the key once; screenshots of the server and terminate pages at desktop
and phone widths go to /tmp/shots/."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from portal.accounts.models import User
from portal.core.management.commands.devserver import embedded_s3_env
from provisioning.storage.models import Credential
from tests.browser_login import log_in
from tests.conftest import PIPELINE_TIMEOUT_MS
from tests.factories import OrganisationFactory, make_node, member_of, staff

SHOTS = Path("/tmp/shots")


@pytest.fixture
def storage_env_for_worker(monkeypatch, embedded_s3, storage_provider, settings):
    """The worker process (started after this) sees the same on-site provider as this process."""
    for name, value in embedded_s3_env(embedded_s3).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("STORAGE_BUCKET_PREFIX", settings.STORAGE_BUCKET_PREFIX)
    monkeypatch.setenv("STORAGE_CREDENTIAL_PROPAGATION_S", "2")
    monkeypatch.setenv("SIMULATED_DRIVER_DELAY_SCALE", "0.05")


def _shoot(page, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(200)
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
        wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
            .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
            .slice(0, 5).map(e => e.tagName + '.' + e.className)""")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), \
            f"{name} scrolls sideways at {width} px: {wide}"
    page.set_viewport_size({"width": 1280, "height": 900})


@pytest.mark.browser
@pytest.mark.celery_worker
def test_wizard_to_an_active_server_with_a_bucket_and_its_key_revealed_once(
        live_server, page, catalog, require_postgres, storage_env_for_worker, celery_worker_process,
        tmp_path):
    acme = OrganisationFactory(name="Acme AI", slug="acme-ai")
    member_of(acme, username="alice")
    staff(User.StaffRole.APPROVER, username="sam")
    base = live_server.url
    log_in(page, base, "alice")

    page.goto(f"{base}/sizing/")
    # exact: "Show plans" would also match the data step's "Show plans now", which a click can reach
    # while the goal step loads, and htmx drops a second request of a form with one in flight
    for step in ("Next: training setup", "Next: data", "Next: goal", "Show plans"):
        page.get_by_role("button", name=step, exact=True).click()
    page.get_by_role("button", name="Configure this server").first.click()
    page.wait_for_url("**/configure/?plan=*")
    expect(page.get_by_label("Object storage")).to_have_value("minio")  # the plan's bucket
    storage_tb = int(page.get_by_label("Bucket size (TB)").input_value())
    assert storage_tb >= 1
    expect(page.get_by_label("Keep the bucket after termination (days)")).to_have_value("30")
    sku = page.locator("#id_sku").input_value()
    nodes = int(page.locator("#id_node_count").input_value())
    for i in range(nodes):
        make_node(sku=sku, state_dir=tmp_path, hostname=f"gpu-demo-{i:02d}", fabric_group="f1",
                  delay_scale=0.05)
    page.get_by_role("button", name="Create quote").click()
    page.wait_for_url(re.compile(r".*/configure/quotes/Q-[0-9A-F]+/$"))
    expect(page.get_by_text(f"{storage_tb} TB on On-site MinIO")).to_be_visible()
    page.get_by_role("button", name="Place order").click()
    page.wait_for_url(re.compile(r".*/orders/O-[0-9A-F]+/$"))
    reference = page.url.rstrip("/").rsplit("/", 1)[1]

    if page.locator("#order-state").inner_text() == "Pending approval":
        staff_context = page.context.browser.new_context(viewport={"width": 1280, "height": 900})
        staff_page = staff_context.new_page()
        log_in(staff_page, base, "sam")
        staff_page.goto(f"{base}/ops/approvals/")
        staff_page.locator(f"#order-{reference}").get_by_role(
            "button", name=f"Approve {reference}").click()
        expect(staff_page.get_by_text(f"Order {reference} approved")).to_be_visible()
        staff_context.close()

    page.goto(f"{base}/orders/{reference}/")
    expect(page.locator("#order-state")).to_have_text("Active", timeout=PIPELINE_TIMEOUT_MS)
    page.get_by_role("link", name="Open server page").click()
    cred = Credential.objects.get(bucket__order__reference=reference, active=True)
    card = page.locator("#storage")
    expect(card).to_contain_text(cred.bucket.name)
    expect(card).to_contain_text(cred.access_key_id)
    expect(card).to_contain_text(cred.bucket.endpoint)
    _shoot(page, "server")

    page.get_by_role("button", name="Reveal secret key").click()
    expect(page.get_by_role("heading", name="Your bucket key")).to_be_visible()
    expect(page.locator("#secret")).to_have_text(cred.secret)
    expect(page.locator("pre.snippet")).to_contain_text(f"AWS_ENDPOINT_URL={cred.bucket.endpoint}")
    _shoot(page, "secret")
    page.get_by_role("link", name="I have stored it, back to the server").click()
    expect(page.get_by_role("button", name="Reveal secret key")).to_have_count(0)
    expect(page.get_by_text("Rotate key…")).to_be_visible()
    assert cred.secret not in page.content()
    _shoot(page, "server-after-reveal")

    page.goto(f"{base}/orders/{reference}/terminate/")
    expect(page.get_by_text("/data/checkpoints").first).to_be_visible()
    expect(page.locator(".consequences")).to_contain_text(cred.bucket.name)
    _shoot(page, "terminate")
