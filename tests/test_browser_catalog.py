"""In real Chromium at 390 and 1280 px: sort the catalog live, then configure a server from its
row; the configurator opens with that server chosen."""

import pytest
from playwright.sync_api import expect


@pytest.mark.browser
@pytest.mark.parametrize("width", (390, 1280))
def test_sort_then_configure_a_server_from_the_catalog(live_server, browser, catalog, width,
                                                       tmp_path):
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    errors = []
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))  # noqa: B023
    page.goto(f"{live_server.url}/catalog/")
    page.get_by_label("Sort by").select_option("price")
    page.wait_for_url("**/catalog/?*sort=price*")
    first = page.locator("#sku-table tbody tr").first
    expect(first).to_contain_text("1× NVIDIA GeForce RTX 4090")  # $0.49/h, the cheapest
    page.screenshot(path=str(tmp_path / f"catalog-{width}.png"), full_page=False)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    first.get_by_role("link", name="Configure 1× NVIDIA GeForce RTX 4090").click()
    page.wait_for_url("**/configure/?sku=1x-rtx-4090-24gb")
    expect(page.get_by_label("GPU server")).to_have_value("1x-rtx-4090-24gb")
    expect(page.locator(".price-lines")).to_contain_text("$0.49")  # the server line
    assert errors == []
    context.close()
