"""In real Chromium: size llama-3.1-8b, see plans and charts, configure the server, change NVMe."""

import re

import pytest
from playwright.sync_api import expect


@pytest.mark.browser
def test_size_configure_and_price_in_chromium(live_server, page, catalog):
    page.goto(f"{live_server.url}/sizing/")
    expect(page.get_by_label("Model", exact=True)).to_have_value("llama-3.1-8b")
    page.evaluate("window.__sameDocument = true")  # survives only if htmx swaps, not reloads

    page.get_by_role("button", name="Next: training setup").click()
    expect(page.get_by_role("heading", name="2. Training setup")).to_be_visible()
    expect(page.get_by_label("Full fine-tuning / pre-training")).to_be_checked()
    dora = page.get_by_label("DoRA (weight-decomposed LoRA)")  # shown for LoRA adapters only
    expect(dora).to_be_hidden()
    page.get_by_label("LoRA adapters").check()
    expect(dora).to_be_visible()
    page.get_by_label("QLoRA (4-bit base)").check()
    expect(dora).to_be_hidden()
    page.get_by_label("Full fine-tuning / pre-training").check()
    page.get_by_role("button", name="Next: data").click()
    expect(page.get_by_role("heading", name="3. Data")).to_be_visible()
    page.get_by_role("button", name="Next: goal").click()
    expect(page.get_by_role("heading", name="4. Goal")).to_be_visible()
    page.get_by_role("button", name="Show plans").click()

    expect(page.get_by_role("heading", name=re.compile("Recommended for llama-3.1-8b"))).to_be_visible()
    expect(page.locator("article.plan-card")).to_have_count(5)
    expect(page.locator("#memory-chart")).to_be_visible()
    expect(page.locator("#cost-chart")).to_be_visible()
    assert page.evaluate("window.__sameDocument === true")

    first_plan = page.locator("article.plan-card h3").first.inner_text()
    page.get_by_label("Shortest time").check()  # results follow the inputs, no reload
    expect(page.locator("article.plan-card h3").first).not_to_have_text(first_plan)
    assert page.evaluate("window.__sameDocument === true")

    sku_title = page.locator("article.plan-card h3").first.inner_text()
    page.get_by_role("button", name="Configure this server").first.click()
    page.wait_for_url("**/configure/?plan=*")
    expect(page.get_by_role("heading", name="From your sizing")).to_be_visible()
    selected = page.locator("#id_sku option:checked").inner_text()
    assert selected.split(" · ")[0].replace("NVIDIA ", "") in sku_title

    price = page.locator("#price-hourly").inner_text()
    page.get_by_label("NVMe scratch (per node)").select_option("nvme-10tb-raid10")
    expect(page.locator("#price-hourly")).not_to_have_text(price)
    expect(page.locator(".price-lines")).to_contain_text("NVMe 10 TB")
    assert "nvme=nvme-10tb-raid10" in page.url  # the address follows, so a reload keeps the choice
