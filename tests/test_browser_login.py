import pytest

from tests.factories import UserFactory


@pytest.mark.browser
def test_log_in_and_see_the_catalog_in_chromium(live_server, page, catalog):
    UserFactory(username="alice")
    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("correct-horse-battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")
    assert page.get_by_role("heading", name="Welcome, alice").is_visible()
    page.get_by_role("link", name="Servers").click()
    page.wait_for_url("**/catalog/")
    assert page.locator("#sku-table tbody tr").count() == 30
    assert page.get_by_text("8× NVIDIA H100 SXM5 80GB").is_visible()
