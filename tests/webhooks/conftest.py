import pytest

from portal.webhooks.services import endpoint_create


@pytest.fixture(autouse=True)
def worker_allows_loopback(monkeypatch):
    """Read by a worker process at start (the receivers here listen on loopback)."""
    monkeypatch.setenv("WEBHOOK_ALLOW_LOOPBACK", "true")


@pytest.fixture
def loopback_http(settings):
    settings.WEBHOOK_ALLOW_LOOPBACK = True


@pytest.fixture
def hook(people, httpserver, loopback_http):
    """The reseller's endpoint on a real HTTP receiver on loopback; ``hook.secret`` as shown once."""
    endpoint, secret = endpoint_create(organisation=people.reseller, url=httpserver.url_for("/hook"))
    endpoint.shown_secret = secret
    return endpoint
