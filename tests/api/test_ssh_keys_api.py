"""SSH keys through the API: /api/v1/ssh-keys (list, add) and /api/v1/ssh-keys/{id} (retrieve,
remove), for the key's organisation and, for a reseller, its customers."""

from rest_framework.test import APIClient

from portal.accounts.models import Membership, SSHKey
from portal.accounts.services import api_key_revoke, ssh_key_add
from tests.accounts.ssh_keygen import new_public_key
from tests.api.conftest import assert_problem, key_client
from tests.factories import MembershipFactory


def test_a_customer_key_adds_lists_reads_and_removes_its_keys(people):
    api = key_client(people.acme)
    line = new_public_key(comment="ci@runner")
    created = api.post("/api/v1/ssh-keys", {"public_key": line}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    key = SSHKey.objects.get(organisation=people.acme)
    assert body == {"id": key.pk, "organisation": "acme-ai", "name": "ci@runner",
                    "key_type": "ssh-ed25519", "bits": 256, "fingerprint": key.fingerprint,
                    "public_key": " ".join(line.split()[:2]), "created_at": body["created_at"]}
    assert created["Location"] == f"/api/v1/ssh-keys/{key.pk}"
    assert [k["id"] for k in api.get("/api/v1/ssh-keys").json()["results"]] == [key.pk]
    assert api.get(f"/api/v1/ssh-keys/{key.pk}").json()["fingerprint"] == key.fingerprint
    assert api.delete(f"/api/v1/ssh-keys/{key.pk}").status_code == 204
    assert not SSHKey.objects.exists()
    assert_problem(api.get(f"/api/v1/ssh-keys/{key.pk}"), 404)


def test_bad_keys_are_problems_by_field_and_store_nothing(people):
    api = key_client(people.acme)
    body = assert_problem(api.post("/api/v1/ssh-keys", {"public_key": new_public_key("ssh-rsa", bits=1024)},
                                   format="json"), 400, "invalid")
    assert "at least 2048" in body["errors"]["public_key"][0]
    assert "public_key" in assert_problem(api.post("/api/v1/ssh-keys", {}, format="json"), 400)["errors"]
    line = new_public_key()
    api.post("/api/v1/ssh-keys", {"public_key": line, "name": "first"}, format="json")
    again = assert_problem(api.post("/api/v1/ssh-keys", {"public_key": line}, format="json"), 409)
    assert "already added as “first”" in again["errors"]["public_key"][0]
    assert SSHKey.objects.count() == 1


def test_two_keys_on_one_line_are_a_400_not_one_key(people):
    api = key_client(people.acme)
    two = f"{new_public_key()} {new_public_key()}"
    body = assert_problem(api.post("/api/v1/ssh-keys", {"public_key": two}, format="json"), 400, "invalid")
    assert "more than one key" in body["errors"]["public_key"][0]
    assert not SSHKey.objects.exists()


def test_a_read_key_lists_but_cannot_add_or_remove(people):
    key = ssh_key_add(public_key=new_public_key(), organisation=people.acme)
    api = key_client(people.acme, scopes=["read"])
    assert api.get("/api/v1/ssh-keys").status_code == 200
    assert_problem(api.post("/api/v1/ssh-keys", {"public_key": new_public_key()}, format="json"), 403)
    assert_problem(api.delete(f"/api/v1/ssh-keys/{key.pk}"), 403)
    assert list(SSHKey.objects.all()) == [key]


def test_a_revoked_key_is_refused(people):
    api = key_client(people.acme)
    api_key_revoke(api_key=api.api_key)
    assert_problem(api.get("/api/v1/ssh-keys"), 401)


def test_a_reseller_acts_for_its_customer(people):
    api = key_client(people.reseller)
    created = api.post("/api/v1/ssh-keys", {"public_key": new_public_key(), "customer": "resale-client"},
                       format="json")
    assert created.status_code == 201 and created.json()["organisation"] == "resale-client"
    own = api.post("/api/v1/ssh-keys", {"public_key": new_public_key()}, format="json").json()
    assert own["organisation"] == "gpu-resale"
    listed = api.get("/api/v1/ssh-keys", {"customer": "resale-client"}).json()["results"]
    assert [k["id"] for k in listed] == [created.json()["id"]]
    assert len(api.get("/api/v1/ssh-keys").json()["results"]) == 2
    assert api.delete(f"/api/v1/ssh-keys/{created.json()['id']}").status_code == 204
    body = assert_problem(api.post("/api/v1/ssh-keys", {"public_key": new_public_key(),
                                                        "customer": "other-lab"}, format="json"), 400)
    assert "No customer 'other-lab' of yours" in str(body["errors"]["customer"])


def test_a_child_key_cannot_see_its_resellers_keys(people):
    theirs = ssh_key_add(public_key=new_public_key(), organisation=people.reseller)
    api = key_client(people.client_org)
    assert api.get("/api/v1/ssh-keys").json()["results"] == []
    assert_problem(api.get(f"/api/v1/ssh-keys/{theirs.pk}"), 404)
    assert_problem(api.delete(f"/api/v1/ssh-keys/{theirs.pk}"), 404)
    body = assert_problem(api.post("/api/v1/ssh-keys", {"public_key": new_public_key(),
                                                        "customer": "gpu-resale"}, format="json"), 400)
    assert "customer" in body["errors"]
    assert SSHKey.objects.filter(organisation=people.reseller).count() == 1


def test_an_outsider_gets_404_for_another_organisations_key(people):
    key = ssh_key_add(public_key=new_public_key(), organisation=people.acme)
    api = key_client(people.outsider_org)
    assert_problem(api.get(f"/api/v1/ssh-keys/{key.pk}"), 404)
    assert_problem(api.delete(f"/api/v1/ssh-keys/{key.pk}"), 404)
    assert api.get("/api/v1/ssh-keys").json()["results"] == []
    assert SSHKey.objects.filter(pk=key.pk).exists()


def test_personal_keys_are_not_in_the_api(people):
    ssh_key_add(public_key=new_public_key(), user=people.alice)
    assert key_client(people.acme).get("/api/v1/ssh-keys").json()["results"] == []


def test_adding_is_idempotent(people):
    api = key_client(people.acme)
    payload = {"public_key": new_public_key(), "name": "once"}
    first = api.post("/api/v1/ssh-keys", payload, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = api.post("/api/v1/ssh-keys", payload, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert again.status_code == 201 and again.json() == first.json()
    other = api.post("/api/v1/ssh-keys", {**payload, "name": "twice"}, format="json",
                     HTTP_IDEMPOTENCY_KEY="k-1")
    assert_problem(other, 422)
    assert SSHKey.objects.count() == 1


def test_a_signed_in_non_admin_cannot_change_the_organisations_keys_through_the_api(people):
    member = MembershipFactory(organisation=people.reseller, role=Membership.Role.MEMBER).user
    key = ssh_key_add(public_key=new_public_key(), organisation=people.reseller)
    client = APIClient()
    client.force_login(member)
    assert client.get("/api/v1/ssh-keys").json()["results"][0]["id"] == key.pk
    assert_problem(client.post("/api/v1/ssh-keys", {"public_key": new_public_key()}, format="json"), 403)
    assert_problem(client.delete(f"/api/v1/ssh-keys/{key.pk}"), 403)
    assert list(SSHKey.objects.all()) == [key]
