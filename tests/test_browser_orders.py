"""In real Chromium: a customer orders from a quote, staff approve it in the queue, and the
customer watches the live progress (htmx polling) until the server is active. A real Celery
worker runs the pipeline with slowed-down simulated nodes."""

import re

import pytest
from playwright.sync_api import expect

from portal.accounts.models import User
from tests.browser_login import log_in
from tests.conftest import PAGE_TIMEOUT_MS, PIPELINE_TIMEOUT_MS
from tests.factories import H100_SKU, OrganisationFactory, make_node, make_quote, member_of, staff


@pytest.mark.browser
@pytest.mark.celery_worker
def test_order_approve_and_watch_it_come_up(live_server, page, catalog, require_postgres,
                                            celery_worker_process, tmp_path):
    acme = OrganisationFactory(name="Acme AI", slug="acme-ai")
    alice = member_of(acme, username="alice")
    staff(User.StaffRole.APPROVER, username="sam")
    quote = make_quote(acme, by=alice, plan={
        "model": "llama-3.1-8b", "sku": H100_SKU, "nodes": 1, "gpus_per_node": 8,
        "gpu_name": "NVIDIA H100 SXM5 80GB", "per_gpu_total_bytes": 61_400_000_000,
        "gpu_memory_bytes": 80_000_000_000, "headroom_bytes": 14_600_000_000})
    # Slow enough to watch the steps go by, fast enough for a test (a few seconds in all).
    make_node(sku=H100_SKU, state_dir=tmp_path, hostname="gpu-h100-a01", delay_scale=0.6)
    base = live_server.url

    # The customer places the order from the quote page and sees it pending.
    log_in(page, base, "alice")
    page.goto(f"{base}/configure/quotes/{quote.reference}/")
    page.get_by_role("button", name="Place order").click()
    page.wait_for_url(re.compile(r".*/orders/O-[0-9A-F]+/$"))
    reference = page.url.rstrip("/").rsplit("/", 1)[1]
    expect(page.locator("#order-state")).to_have_text("Pending approval")
    expect(page.get_by_text(f"Order {reference} placed")).to_be_visible()
    expect(page.get_by_role("button", name="Cancel order")).to_be_visible()

    # Staff approve it in the queue, with the suggested node ticked.
    staff_context = page.context.browser.new_context(viewport={"width": 1280, "height": 900})
    staff_page = staff_context.new_page()
    staff_page.set_default_timeout(PAGE_TIMEOUT_MS)
    log_in(staff_page, base, "sam")
    staff_page.get_by_role("link", name="Approvals").click()
    card = staff_page.locator(f"#order-{reference}")
    expect(card.get_by_text("Fits:")).to_be_visible()
    expect(card.get_by_text("Approving takes gpu-h100-a01")).to_be_visible()
    card.get_by_role("link", name="Choose nodes…").click()  # htmx loads the node choice
    expect(card.get_by_label(re.compile("gpu-h100-a01"))).to_be_checked()
    card.get_by_role("button", name=f"Approve {reference}").click()
    expect(staff_page.get_by_text(f"Order {reference} approved")).to_be_visible()
    expect(staff_page.get_by_text("Nothing to approve")).to_be_visible()
    staff_context.close()

    # The customer watches the pipeline on the order page: htmx polls, the page follows the
    # order through provisioning and verification until it is active.
    page.goto(f"{base}/orders/{reference}/")
    expect(page.get_by_role("progressbar")).to_be_visible()
    expect(page.get_by_text("updates live")).to_be_visible()  # still working: htmx polls
    expect(page.locator("#order-state")).to_have_text("Active", timeout=PIPELINE_TIMEOUT_MS)
    expect(page.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "100")
    expect(page.get_by_text("All steps finished.")).to_be_visible()
    page.get_by_role("link", name="Open server page").click()
    expect(page.get_by_role("heading", name="Acceptance report")).to_be_visible()
    expect(page.get_by_text("Passed", exact=True)).to_be_visible()
