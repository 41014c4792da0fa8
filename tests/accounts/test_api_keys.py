import pytest
from django.core.management import CommandError, call_command
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.test import APIRequestFactory

from portal.accounts.authentication import ApiKeyAuthentication
from portal.accounts.models import ApiKey
from portal.accounts.services import api_key_authenticate, api_key_issue, api_key_revoke
from tests.factories import OrganisationFactory


def test_key_is_stored_hashed_with_a_visible_prefix(db):
    issued = api_key_issue(organisation=OrganisationFactory(), name="billing")
    stored = ApiKey.objects.get()
    assert issued.plaintext.startswith(f"ty_{stored.prefix}_")
    assert issued.plaintext not in stored.hashed_secret
    assert len(stored.hashed_secret) == 64
    assert api_key_authenticate(issued.plaintext) == stored


def test_wrong_or_revoked_keys_are_refused(db):
    issued = api_key_issue(organisation=OrganisationFactory(), name="billing")
    assert api_key_authenticate(issued.plaintext[:-1] + "x") is None
    assert api_key_authenticate("garbage") is None
    api_key_revoke(api_key=issued.api_key)
    assert api_key_authenticate(issued.plaintext) is None


def test_api_authentication_header(db):
    issued = api_key_issue(organisation=OrganisationFactory(slug="acme"), name="ci")
    auth = ApiKeyAuthentication()
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Api-Key {issued.plaintext}")
    principal, key = auth.authenticate(request)
    assert principal.organisation.slug == "acme"
    api_key_revoke(api_key=key)
    with pytest.raises(AuthenticationFailed, match="Invalid or revoked"):
        auth.authenticate(request)


def test_a_key_needs_a_name(db):
    with pytest.raises(ValueError, match="needs a name"):
        api_key_issue(organisation=OrganisationFactory(), name="  ")


def test_issue_api_key_command_prints_the_key_once(db, capsys):
    OrganisationFactory(slug="acme")
    call_command("issue_api_key", "--org", "acme", "--name", "reseller sync")
    out = capsys.readouterr().out.strip()
    assert api_key_authenticate(out).name == "reseller sync"
    with pytest.raises(CommandError, match="No organisation with slug 'nope'"):
        call_command("issue_api_key", "--org", "nope", "--name", "x")
