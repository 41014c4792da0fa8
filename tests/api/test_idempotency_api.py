"""What an `Idempotency-Key` keeps: answers encrypted at rest (they carry new API keys and
webhook secrets), deleted by the beat task after 24 hours, shared by the organisation's keys; and
a key that rotated itself can retry that rotation and get the new key it lost."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts.models import ApiKey
from portal.api.idempotency import SELF_ROTATION_REPLAY
from portal.api.models import IdempotencyKey
from portal.api.tasks import idempotency_purge_task
from tests.api.conftest import assert_problem, key_client
from tests.conftest import LOOPBACK_NETWORKS


@pytest.fixture
def acme_api(people):
    return key_client(people.acme)


def _stored_columns() -> str:
    """Every column of every stored answer, as the database holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM api_idempotencykey")
        return repr(cursor.fetchall())


def _client(plaintext: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {plaintext}")
    return client


def test_no_secret_is_stored_in_plaintext_and_the_replay_still_carries_it(people, acme_api, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    key = acme_api.post("/api/v1/api-keys", {"name": "shop"}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    hook = acme_api.post("/api/v1/webhooks", {"url": "http://127.0.0.1:9/in"}, format="json",
                         HTTP_IDEMPOTENCY_KEY="w-1")
    rotated = acme_api.post(f"/api/v1/webhooks/{hook.json()['id']}/rotate-secret",
                            HTTP_IDEMPOTENCY_KEY="r-1")
    secrets = [key.json()["key"], hook.json()["secret"], rotated.json()["secret"]]
    assert IdempotencyKey.objects.count() == 3
    stored = _stored_columns()
    for secret in secrets:
        assert secret not in stored
        # nor the random part alone (after `ty_<prefix>_` or `whsec_`; it may itself hold "_")
        whsec = secret.startswith("whsec_")
        random_part = secret.removeprefix("whsec_") if whsec else secret.split("_", 2)[2]
        assert len(random_part) == 43 and random_part not in stored
    again = acme_api.post("/api/v1/api-keys", {"name": "shop"}, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert again.json()["key"] == secrets[0] and again["Idempotent-Replayed"] == "true"


def test_the_beat_task_deletes_expired_answers_only(people, acme_api):
    for name in ("old", "new"):
        acme_api.post("/api/v1/api-keys", {"name": name}, format="json", HTTP_IDEMPOTENCY_KEY=name)
    IdempotencyKey.objects.filter(key="old").update(created_at=timezone.now() - timedelta(hours=25))
    assert idempotency_purge_task.apply().get() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]
    entry = settings.CELERY_BEAT_SCHEDULE["api-idempotency-purge"]
    assert entry["task"] == idempotency_purge_task.name


def test_an_expired_answer_is_not_replayed(people, acme_api):
    first = acme_api.post("/api/v1/api-keys", {"name": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="e-1")
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    again = acme_api.post("/api/v1/api-keys", {"name": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="e-1")
    assert again.status_code == 201 and again.json()["prefix"] != first.json()["prefix"]


def test_answers_are_shared_by_the_organisations_keys_not_beyond(people, acme_api):
    body = {"name": "once"}
    first = acme_api.post("/api/v1/api-keys", body, format="json", HTTP_IDEMPOTENCY_KEY="s-1")
    other_key = key_client(people.acme)
    again = other_key.post("/api/v1/api-keys", body, format="json", HTTP_IDEMPOTENCY_KEY="s-1")
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    outsider = key_client(people.outsider_org)
    theirs = outsider.post("/api/v1/api-keys", body, format="json", HTTP_IDEMPOTENCY_KEY="s-1")
    assert theirs.status_code == 201 and theirs.json()["prefix"] != first.json()["prefix"]
    assert "Idempotent-Replayed" not in theirs
    assert ApiKey.objects.filter(name="once").count() == 2


# --- a key rotating itself ------------------------------------------------------------------
@pytest.fixture
def rotated(people):
    """A key that rotated itself; the answer (the new key) is what a retry must get back."""
    from portal.accounts.services import api_key_issue

    issued = api_key_issue(organisation=people.acme, name="storefront")
    old = _client(issued.plaintext)
    path = f"/api/v1/api-keys/{issued.api_key.prefix}/rotate"
    first = old.post(path, HTTP_IDEMPOTENCY_KEY="rot-self")
    assert first.status_code == 201, first.content
    return issued, old, path, first.json()


def test_a_retry_with_the_revoked_old_key_gets_the_new_key_it_lost(rotated):
    issued, old, path, answer = rotated
    again = old.post(path, HTTP_IDEMPOTENCY_KEY="rot-self")
    assert again.status_code == 201, again.content
    assert again.json() == answer and again["Idempotent-Replayed"] == "true"
    assert ApiKey.objects.filter(name="storefront").count() == 2  # rotated once
    assert _client(answer["key"]).get("/api/v1/api-keys").status_code == 200


def test_a_retry_with_the_new_key_gets_the_same_answer(rotated):
    _, _, path, answer = rotated
    again = _client(answer["key"]).post(path, HTTP_IDEMPOTENCY_KEY="rot-self")
    assert again.status_code == 201 and again.json() == answer


def test_the_revoked_old_key_can_do_nothing_else(people, rotated):
    issued, old, path, _ = rotated
    assert_problem(old.post(path, HTTP_IDEMPOTENCY_KEY="another"), 401)
    assert_problem(old.post(path), 401)
    assert_problem(old.get("/api/v1/api-keys", HTTP_IDEMPOTENCY_KEY="rot-self"), 401)
    assert_problem(old.post("/api/v1/api-keys", {"name": "x"}, format="json",
                            HTTP_IDEMPOTENCY_KEY="rot-self"), 401)
    other = key_client(people.acme).api_key
    assert_problem(old.post(f"/api/v1/api-keys/{other.prefix}/rotate", HTTP_IDEMPOTENCY_KEY="rot-self"),
                   401)
    assert ApiKey.objects.filter(name="storefront").count() == 2


def test_the_replay_of_a_self_rotation_ends_after_its_window(rotated):
    issued, old, path, _ = rotated
    ApiKey.objects.filter(pk=issued.api_key.pk).update(
        revoked_at=timezone.now() - SELF_ROTATION_REPLAY - timedelta(seconds=1))
    assert_problem(old.post(path, HTTP_IDEMPOTENCY_KEY="rot-self"), 401)


def test_a_key_rotated_by_another_key_cannot_replay(people, acme_api):
    from portal.accounts.services import api_key_issue

    issued = api_key_issue(organisation=people.acme, name="leaked")
    path = f"/api/v1/api-keys/{issued.api_key.prefix}/rotate"
    assert acme_api.post(path, HTTP_IDEMPOTENCY_KEY="rot-other").status_code == 201
    assert_problem(_client(issued.plaintext).post(path, HTTP_IDEMPOTENCY_KEY="rot-other"), 401)
