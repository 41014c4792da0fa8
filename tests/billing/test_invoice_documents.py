"""An issued invoice as a page, PDF (its text read back with pdftotext) and CSV, over the API,
and in the admin: the organisation's admins read it, others get 404; nobody changes it."""

import csv
import io
import shutil
import subprocess
from datetime import UTC, datetime

import pytest

from portal.accounts.models import User
from portal.billing import invoices
from portal.billing.models import BillingProfile, Invoice
from portal.billing.selectors import month_of
from portal.billing.services import usage_sync
from portal.orders.states import OrderState
from tests.api.conftest import assert_problem, key_client
from tests.conftest import IN_CI
from tests.factories import make_order

MARCH = month_of(datetime(2026, 3, 1, tzinfo=UTC))


@pytest.fixture
def issued(catalog, people, monkeypatch):
    monkeypatch.setattr(invoices.invoice_issued_notify_task, "delay", lambda pk: None)
    order = make_order(people.acme, state=OrderState.ACTIVE)
    usage_sync(order=order, nodes={1: "gpu-h100-a01"}, storage=False,
               at=datetime(2026, 3, 3, 9, tzinfo=UTC), cause="t")
    usage_sync(order=order, nodes={}, storage=False, at=datetime(2026, 3, 3, 21, tzinfo=UTC), cause="t")
    BillingProfile.objects.create(organisation=people.acme, legal_name="Acme AI SAS",
                                  address="1 rue de la Paix\n75002 Paris", country="FR",
                                  vat_id="FR40303265045")
    [pk] = invoices.month_close(period=MARCH, now=datetime(2026, 4, 2, tzinfo=UTC))
    invoice = invoices.invoice_finalise(invoice=Invoice.objects.get(pk=pk), by=people.olga)
    invoice.order = order
    return invoice


def _pdftotext(pdf: bytes, tmp_path) -> str:
    if shutil.which("pdftotext") is None:
        if IN_CI:
            pytest.fail("pdftotext is missing: install Debian's poppler-utils")
        pytest.skip("pdftotext is missing (Debian's poppler-utils)")
    path = tmp_path / "invoice.pdf"
    path.write_bytes(pdf)
    return subprocess.run(["pdftotext", "-layout", str(path), "-"], check=True,
                          capture_output=True, text=True).stdout


def test_the_page_pdf_and_csv_say_the_same(issued, people, login, tmp_path):
    client = login(people.alice)
    base = f"/billing/{people.acme.slug}/invoices/{issued.number}/"
    html = client.get(base).content.decode()
    assert issued.number in html and "Acme AI SAS" in html and "Reverse charge" in html
    response = client.get(base + "pdf")
    assert response["Content-Type"] == "application/pdf"
    text = _pdftotext(response.content, tmp_path)
    assert f"Invoice {issued.number}" in text and "Acme AI SAS" in text
    assert "FR40303265045" in text and "Article 196" in text
    assert f"${issued.total:,}" in text and "gpu-h100-a01" in text and "(12 h)" in text
    rows = list(csv.reader(io.StringIO(client.get(base + "csv").content.decode())))
    assert rows[0][:2] == ["document", "number"]
    assert rows[1][1] == issued.number and rows[1][6] == "12.00"
    assert rows[-1][5:8] == ["Total", "", str(issued.total)]


def test_an_outsider_gets_404_on_every_invoice_page(issued, people, login):
    client = login(people.charlie)
    for suffix in ("", "pdf", "csv"):
        assert client.get(f"/billing/{people.acme.slug}/invoices/{issued.number}/{suffix}").status_code == 404
    # Its own organisation's path with acme's number: still nothing.
    assert client.get(f"/billing/{people.outsider_org.slug}/invoices/{issued.number}/").status_code == 404


def test_the_api_lists_and_serves_it_and_refuses_changes(issued, people, tmp_path):
    client = key_client(people.acme)
    [row] = client.get("/api/v1/invoices").json()
    assert row["number"] == issued.number and row["customer"]["vat_id"] == "FR40303265045"
    assert row["tax_note"].startswith("Reverse charge") and row["total"] == str(issued.total)
    one = client.get(f"/api/v1/invoices/{issued.number}")
    assert one.json()["lines"][0]["hours"] == "12.00"
    pdf = client.get(f"/api/v1/invoices/{issued.number}/pdf")
    assert pdf["Content-Type"] == "application/pdf" and issued.number in _pdftotext(pdf.content, tmp_path)
    for method in ("put", "patch", "delete"):
        assert_problem(getattr(client, method)(f"/api/v1/invoices/{issued.number}", {"total": "1"},
                                               format="json"), 405)
    assert Invoice.objects.get(pk=issued.pk).total == issued.total
    outsider = key_client(people.outsider_org)
    assert outsider.get("/api/v1/invoices").json() == []
    assert_problem(outsider.get(f"/api/v1/invoices/{issued.number}"), 404)
    assert_problem(outsider.get(f"/api/v1/invoices/{issued.number}/pdf"), 404)
    assert_problem(outsider.get("/api/v1/invoices", {"customer": people.acme.slug}), 404)


def test_the_admin_refuses_to_change_or_delete_it(issued, login):
    root = User.objects.create_superuser("root", "root@example.com", "pw")
    client = login(root)
    url = f"/admin/billing/invoice/{issued.pk}/"
    page = client.get(url + "change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content  # view only
    assert client.post(url + "change/", {"total": "1.00"}).status_code == 403
    assert client.post(url + "delete/", {"post": "yes"}).status_code == 403
    assert Invoice.objects.get(pk=issued.pk).total == issued.total


def test_a_vat_id_of_another_country_is_refused_with_a_reason(people, catalog):
    from django.core.exceptions import ValidationError

    profile = BillingProfile(organisation=people.acme, legal_name="Acme", address="x",
                             country="de", vat_id="FR40303265045")
    with pytest.raises(ValidationError, match="not one of DE"):
        profile.full_clean()
