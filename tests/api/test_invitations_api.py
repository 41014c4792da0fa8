"""A reseller invites people to its customers: POST/GET /api/v1/customers/{slug}/invitations.
The person gets the link by e-mail; the answer never carries it."""

import pytest

from portal.accounts.models import Invitation
from portal.accounts.tasks import invitation_send_task
from tests.api.conftest import assert_problem, key_client
from tests.factories import OrganisationFactory, member_of

URL = "/api/v1/customers/resale-client/invitations"


@pytest.fixture
def reseller_api(people):
    return key_client(people.reseller)


def test_a_reseller_invites_to_its_customer_and_lists_the_pending(
        people, reseller_api, mailoutbox, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(invitation_send_task, "delay", lambda pk: invitation_send_task(pk))
    with django_capture_on_commit_callbacks(execute=True):
        response = reseller_api.post(URL, {"email": "carol@example.org", "role": "admin"},
                                     format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["organisation"], body["email"], body["role"], body["state"]) == (
        "resale-client", "carol@example.org", "admin", "pending")
    assert "token" not in str(body) and "/account/invitations/" not in str(body)
    invitation = Invitation.objects.get(reference=body["reference"])
    assert invitation.invited_by is None and invitation.invited_by_key == reseller_api.api_key
    [message] = mailoutbox
    assert "GPU Resale invites you to join Resale Client" in message.body
    listed = reseller_api.get(URL).json()["results"]
    assert [i["reference"] for i in listed] == [body["reference"]]


def test_input_is_validated(reseller_api):
    errors = assert_problem(reseller_api.post(URL, {"email": "nope"}, format="json"), 400)["errors"]
    assert "email" in errors
    errors = assert_problem(reseller_api.post(URL, {"email": "a@b.example", "role": "root"},
                                              format="json"), 400)["errors"]
    assert "role" in errors
    assert not Invitation.objects.exists()


def test_creating_is_idempotent(reseller_api):
    first = reseller_api.post(URL, {"email": "once@example.org"}, format="json",
                              HTTP_IDEMPOTENCY_KEY="inv-1")
    again = reseller_api.post(URL, {"email": "once@example.org"}, format="json",
                              HTTP_IDEMPOTENCY_KEY="inv-1")
    assert first.status_code == again.status_code == 201 and again.json() == first.json()
    assert Invitation.objects.filter(email="once@example.org").count() == 1
    other = reseller_api.post(URL, {"email": "other@example.org"}, format="json",
                              HTTP_IDEMPOTENCY_KEY="inv-1")
    assert_problem(other, 422)


def test_an_outsider_gets_404(people):
    OrganisationFactory(parent=OrganisationFactory(kind="reseller"), slug="theirs")
    client = key_client(people.reseller)
    assert_problem(client.get("/api/v1/customers/theirs/invitations"), 404)
    assert_problem(client.post("/api/v1/customers/theirs/invitations", {"email": "x@example.org"},
                               format="json"), 404)
    other_reseller = key_client(OrganisationFactory(kind="reseller", slug="rival"))
    assert_problem(other_reseller.post(URL, {"email": "x@example.org"}, format="json"), 404)
    assert not Invitation.objects.exists()


def test_a_read_key_cannot_invite(people):
    client = key_client(people.reseller, scopes=["read"])
    assert client.get(URL).status_code == 200
    assert_problem(client.post(URL, {"email": "x@example.org"}, format="json"), 403)
    assert not Invitation.objects.exists()


def test_a_customer_key_has_no_customers_to_invite_to(people):
    # 404, as GET /customers/acme-ai answers it (it was a 403 before issue 28).
    assert_problem(key_client(people.acme).post("/api/v1/customers/acme-ai/invitations",
                                                {"email": "x@example.org"}, format="json"), 404)


def test_a_resellers_plain_member_neither_reads_nor_sends_a_customers_invitations(people, client):
    """Issue 28: the list answered 200 with the invitees' addresses, the refused POST named the
    customer. Managing a customer's people is for the reseller's admins: a 404 naming nothing."""
    reseller_api = key_client(people.reseller)
    assert reseller_api.post(URL, {"email": "dana@deeplabs.example"}, format="json").status_code == 201
    client.force_login(member_of(people.reseller, username="ron"))
    listed = client.get(URL)
    assert_problem(listed, 404)
    sent = client.post(URL, {"email": "eve@example.org"}, content_type="application/json")
    assert_problem(sent, 404)
    for answer in (listed, sent):
        text = answer.content.decode()
        assert "dana@deeplabs.example" not in text and "Resale Client" not in text
    assert list(Invitation.objects.values_list("email", flat=True)) == ["dana@deeplabs.example"]
    client.force_login(people.rita)  # the reseller's admin may
    assert [i["email"] for i in client.get(URL).json()["results"]] == ["dana@deeplabs.example"]
