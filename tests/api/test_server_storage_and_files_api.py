"""A server's bucket and files over the API, on an order provisioned end to end (simulated node,
a real S3 server on loopback): the storage block, the key's secret revealed once (a retry with
the same Idempotency-Key shows it again), rotation, the stack files listed and downloaded as the
node got them; storage.retained and storage.deleted webhooks as the bucket moves; tenancy."""

import hashlib
from datetime import timedelta

import pytest

from portal.orders.states import OrderState
from portal.webhooks.models import WebhookEvent
from portal.webhooks.services import endpoint_create
from provisioning.models import ProvisioningRun, StepRun
from provisioning.states import RunKind
from provisioning.storage.models import Credential
from provisioning.storage.services import bucket_retain, buckets_delete_expired
from tests.api.conftest import assert_problem, key_client
from tests.factories import H100_SKU, approved_order, drain, make_node


@pytest.fixture
def active(catalog, people, sim_dir, storage_provider):
    make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-h100-a01")
    order = approved_order(people, storage="minio", storage_tb=2)
    drain(order.runs.get().pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    return order


def _server(order) -> str:
    return f"/api/v1/orders/{order.reference}/server"


def test_the_server_shows_its_bucket_without_the_secret(active, people):
    cred = Credential.objects.get(bucket__order=active, active=True)
    storage = key_client(people.acme).get(_server(active)).json()["storage"]
    assert storage["bucket"] == cred.bucket.name and storage["access_key_id"] == cred.access_key_id
    assert storage["endpoint"] == cred.bucket.endpoint and storage["provider"] == "minio"
    assert (storage["state"], storage["secret_revealable"], storage["retain_until"]) == ("active", True, None)
    assert cred.secret not in str(storage)


def test_the_secret_is_revealed_once_and_a_retry_with_the_same_key_sees_it_again(active, people):
    api, cred = key_client(people.acme), Credential.objects.get(bucket__order=active, active=True)
    path = f"{_server(active)}/storage/reveal"
    first = api.post(path, HTTP_IDEMPOTENCY_KEY="reveal-1")
    assert first.status_code == 200, first.content
    body = first.json()
    assert (body["access_key_id"], body["secret_access_key"]) == (cred.access_key_id, cred.secret)
    assert "[trainyard]" in body["credentials_file"] and first["Cache-Control"] == "no-store"
    again = api.post(path, HTTP_IDEMPOTENCY_KEY="reveal-1")
    assert again.json() == body and again["Idempotent-Replayed"] == "true"
    problem = assert_problem(api.post(path), 409)
    assert "already shown once" in problem["detail"] and cred.secret not in str(problem)
    assert api.get(_server(active)).json()["storage"]["secret_revealable"] is False


def test_rotating_starts_a_day_two_run_and_its_new_secret_can_be_revealed(active, people):
    api = key_client(people.acme)
    api.post(f"{_server(active)}/storage/reveal")
    ProvisioningRun.objects.update(status="succeeded")
    response = api.post(f"{_server(active)}/storage/rotate")
    assert response.status_code == 202, response.content
    run = ProvisioningRun.objects.get(order=active, kind=RunKind.ROTATE_STORAGE_KEY)
    assert response.json()["id"] == run.pk
    drain(run.pk)
    new = Credential.objects.get(bucket__order=active, active=True)
    revealed = api.post(f"{_server(active)}/storage/reveal").json()
    assert revealed["access_key_id"] == new.access_key_id and revealed["secret_access_key"] == new.secret


def test_an_order_without_a_bucket_has_nothing_to_reveal_or_rotate(catalog, people, sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)
    api = key_client(people.acme)
    assert "no bucket" in assert_problem(api.post(f"{_server(order)}/storage/reveal"), 409)["detail"]
    assert "no object storage" in assert_problem(api.post(f"{_server(order)}/storage/rotate"), 409)["detail"]


def test_stack_files_are_listed_and_served_as_the_node_got_them(active, people):
    api = key_client(people.acme, scopes=["read"])
    step = StepRun.objects.get(run__order=active, step="stack")
    recorded = {f["name"]: f["sha256"] for f in step.result["files"]}
    [node] = api.get(f"{_server(active)}/stack-files").json()
    assert (node["hostname"], node["rank"]) == ("gpu-h100-a01", 0)
    assert {f["name"]: f["sha256"] for f in node["files"]} == recorded
    for file in node["files"]:
        download = api.get(file["url"])
        assert download.status_code == 200, file
        assert hashlib.sha256(download.content).hexdigest() == file["sha256"] == download["X-Content-SHA256"]
    env = api.get(f"{_server(active)}/stack-files/gpu-h100-a01/env.sh")
    assert env["Content-Type"].startswith("text/plain") and b"export NPROC_PER_NODE=8" in env.content
    assert_problem(api.get(f"{_server(active)}/stack-files/gpu-h100-a01/id_rsa"), 404)
    assert_problem(api.get(f"{_server(active)}/stack-files/gpu-other/env.sh"), 404)


def test_a_file_that_renders_differently_now_is_a_409(active, people):
    step = StepRun.objects.get(run__order=active, step="stack")
    step.result["files"] = [dict(f, sha256="0" * 64) if f["name"] == "env.sh" else f
                            for f in step.result["files"]]
    step.save(update_fields=["result"])
    response = key_client(people.acme).get(f"{_server(active)}/stack-files/gpu-h100-a01/env.sh")
    assert "re-deploy" in assert_problem(response, 409)["detail"]


def test_outsiders_get_404_and_read_keys_cannot_reveal_or_rotate(active, people):
    outsider = key_client(people.outsider_org)
    for method, path in [("post", "/storage/reveal"), ("post", "/storage/rotate"), ("get", "/stack-files"),
                         ("get", "/stack-files/gpu-h100-a01/env.sh")]:
        assert_problem(getattr(outsider, method)(f"{_server(active)}{path}"), 404)
    reader = key_client(people.acme, scopes=["read"])
    assert_problem(reader.post(f"{_server(active)}/storage/reveal"), 403)
    assert_problem(reader.post(f"{_server(active)}/storage/rotate"), 403)
    assert Credential.objects.get(bucket__order=active, active=True).revealed_at is None
    assert not ProvisioningRun.objects.filter(kind=RunKind.ROTATE_STORAGE_KEY).exists()


def test_the_bucket_kept_and_then_deleted_is_told_by_webhook(active, people):
    endpoint_create(organisation=people.acme, url="https://hooks.example.com/in",
                    event_types=["storage.retained", "storage.deleted"])
    bucket = bucket_retain(order=active)
    [retained] = WebhookEvent.objects.filter(type="storage.retained")
    assert retained.data["bucket"] == bucket.name and retained.data["order"]["reference"] == active.reference
    assert retained.data["retain_until"].startswith(f"{bucket.retain_until:%Y-%m-%d}")
    report = buckets_delete_expired(now=bucket.retain_until + timedelta(seconds=1))
    assert report.deleted == (bucket.name,)
    [deleted] = WebhookEvent.objects.filter(type="storage.deleted")
    assert deleted.data["bucket"] == bucket.name and deleted.data["state"] == "deleted"
