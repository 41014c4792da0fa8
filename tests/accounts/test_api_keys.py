from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.test import APIRequestFactory

from portal.accounts.authentication import ApiKeyAuthentication
from portal.accounts.models import ApiKey, Organisation
from portal.accounts.principals import ApiKeyPrincipal
from portal.accounts.selectors import acting_organisation, organisations_for
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


def test_bearer_is_an_alias_of_api_key(db):
    issued = api_key_issue(organisation=OrganisationFactory(slug="acme"), name="ci")
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    principal, _ = ApiKeyAuthentication().authenticate(request)
    assert principal.organisation.slug == "acme"
    other = APIRequestFactory().get("/", HTTP_AUTHORIZATION="Bearer some-other-token")
    assert ApiKeyAuthentication().authenticate(other) is None  # not ours: no verdict


def test_existing_and_new_keys_read_and_write_unless_told(db):
    org = OrganisationFactory()
    assert api_key_issue(organisation=org, name="a").api_key.scopes == ["read", "write"]
    assert api_key_issue(organisation=org, name="b", scopes=["read"]).api_key.scopes == ["read"]
    with pytest.raises(ValueError, match="Unknown scope admin"):
        api_key_issue(organisation=org, name="c", scopes=["read", "admin"])
    with pytest.raises(ValueError, match="also reads"):
        api_key_issue(organisation=org, name="d", scopes=["write"])


def test_issue_api_key_command_takes_scopes(db, capsys):
    OrganisationFactory(slug="acme")
    call_command("issue_api_key", "--org", "acme", "--name", "dash", "--scopes", "read")
    assert api_key_authenticate(capsys.readouterr().out.strip()).scopes == ["read"]


def test_last_used_at_is_written_at_most_once_a_minute(db):
    issued = api_key_issue(organisation=OrganisationFactory(), name="ci")
    api_key_authenticate(issued.plaintext)
    first = ApiKey.objects.get().last_used_at
    assert first is not None
    with CaptureQueriesContext(connection) as queries:
        api_key_authenticate(issued.plaintext)
    assert [q["sql"] for q in queries if q["sql"].startswith("UPDATE")] == []
    assert ApiKey.objects.get().last_used_at == first
    ApiKey.objects.update(last_used_at=timezone.now() - timedelta(minutes=2))
    api_key_authenticate(issued.plaintext)
    assert ApiKey.objects.get().last_used_at > first


def test_a_reseller_key_acts_for_the_reseller_and_its_customers_only(db):
    reseller = OrganisationFactory(kind=Organisation.Kind.RESELLER)
    child = OrganisationFactory(parent=reseller)
    other_reseller = OrganisationFactory(kind=Organisation.Kind.RESELLER)
    stranger = OrganisationFactory(parent=other_reseller)
    principal = ApiKeyPrincipal(api_key_issue(organisation=reseller, name="r").api_key)
    assert set(organisations_for(principal)) == {reseller, child}
    assert acting_organisation(principal) == reseller
    assert acting_organisation(principal, customer=child.slug) == child
    assert acting_organisation(principal, customer=stranger.slug) is None
    child_key = ApiKeyPrincipal(api_key_issue(organisation=child, name="c").api_key)
    assert set(organisations_for(child_key)) == {child}
    assert acting_organisation(child_key, customer=reseller.slug) is None
