"""The customer's bucket on the server page: shown, secret revealed once, rotate; the terminate
page says what is kept; outsiders get 404 on every storage URL; staff drop storage."""

import pytest

from portal.orders.states import OrderState
from provisioning.models import ProvisioningRun
from provisioning.states import RunKind
from provisioning.storage.models import Credential
from tests.factories import H100_SKU, approved_order, drain, make_node


@pytest.fixture
def active_bucket_order(catalog, people, sim_dir, storage_provider):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, storage="minio", storage_tb=2)
    drain(order.runs.get().pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    return order


def test_server_page_shows_the_bucket_and_reveals_the_secret_once(active_bucket_order, people, login):
    order, client = active_bucket_order, login(people.alice)
    cred = Credential.objects.get(bucket__order=order, active=True)
    page = client.get(f"/orders/{order.reference}/server/").content.decode()
    bucket = cred.bucket
    for text in (bucket.name, bucket.endpoint, "us-east-1", cred.access_key_id, "Reveal secret key"):
        assert text in page
    assert cred.secret not in page

    revealed = client.post(f"/orders/{order.reference}/server/storage/reveal/")
    body = revealed.content.decode()
    assert revealed.status_code == 200 and "no-cache" in revealed["Cache-Control"]
    assert cred.secret in body and "[trainyard]" in body and f"AWS_ENDPOINT_URL={bucket.endpoint}" in body
    again = client.post(f"/orders/{order.reference}/server/storage/reveal/", follow=True)
    assert cred.secret not in again.content.decode()
    assert "already shown once" in again.content.decode()
    page = client.get(f"/orders/{order.reference}/server/").content.decode()
    assert "Reveal secret key" not in page and "Rotate key" in page and cred.secret not in page


def test_rotate_button_starts_a_day_two_run(active_bucket_order, people, login):
    order = active_bucket_order
    response = login(people.alice).post(f"/orders/{order.reference}/server/storage/rotate/")
    assert response.status_code == 302
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.ROTATE_STORAGE_KEY)
    drain(run.pk)
    assert Credential.objects.filter(bucket__order=order).count() == 2
    assert Credential.objects.get(bucket__order=order, active=True).revealed_at is None


def test_terminate_page_says_what_is_kept_where_and_until_when(active_bucket_order, people, login):
    order = active_bucket_order
    page = login(people.alice).get(f"/orders/{order.reference}/terminate/").content.decode()
    bucket = Credential.objects.get(bucket__order=order, active=True).bucket
    assert "/data/checkpoints" in page and bucket.name in page and bucket.endpoint in page
    assert "30 days" in page and "until" in page


def test_outsiders_get_404_on_every_storage_url(active_bucket_order, people, login):
    order, client = active_bucket_order, login(people.charlie)
    for url in (f"/orders/{order.reference}/server/storage/reveal/",
                f"/orders/{order.reference}/server/storage/rotate/"):
        assert client.post(url).status_code == 404
    assert Credential.objects.get(bucket__order=order, active=True).revealed_at is None
    run = order.runs.get()
    assert client.post(f"/ops/runs/{run.pk}/drop-storage/").status_code == 404


def test_staff_drop_storage_button_on_a_failed_run(catalog, people, sim_dir, settings, login):
    settings.STORAGE_PROVIDERS = {**settings.STORAGE_PROVIDERS, "minio": {}}
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, storage="minio", storage_tb=3)
    run = order.runs.get()
    drain(run.pk)
    client = login(people.sam)
    page = client.get(f"/ops/runs/{run.pk}/").content.decode()
    assert "Drop storage and continue" in page and "STORAGE_MINIO_ACCESS_KEY" in page
    response = client.post(f"/ops/runs/{run.pk}/drop-storage/", {"note": "no MinIO here"})
    assert response.status_code == 302
    drain(run.pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE and order.storage_provider is None
