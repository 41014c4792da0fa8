import pytest

from portal.webhooks.services import endpoint_create
from tests.conftest import LOOPBACK_NETWORKS


@pytest.fixture(autouse=True)
def worker_allows_loopback(monkeypatch):
    """Read by a worker process at start (the receivers here listen on loopback)."""
    monkeypatch.setenv("OUTBOUND_ALLOWED_NETWORKS", ",".join(LOOPBACK_NETWORKS))


@pytest.fixture
def loopback_http(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS


@pytest.fixture
def hook(people, httpserver, loopback_http):
    """The reseller's endpoint on a real HTTP receiver on loopback; ``hook.secret`` as shown once."""
    endpoint, secret = endpoint_create(organisation=people.reseller, url=httpserver.url_for("/hook"))
    endpoint.shown_secret = secret
    return endpoint
