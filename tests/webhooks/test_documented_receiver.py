"""The receiver printed in docs/api.md, run as written, accepts our deliveries and refuses one
signed with another secret."""

import re
import subprocess
import sys
import time

import pytest
import requests

from portal.webhooks.delivery import delivery_attempt
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint
from portal.webhooks.publish import endpoint_test_send
from portal.webhooks.services import endpoint_create
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.django_db


def _documented_receiver() -> str:
    text = (REPO_ROOT / "docs" / "api.md").read_text()
    [code] = [block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "def verified" in block]
    return code


@pytest.fixture
def receiver(tmp_path, free_tcp_port, people, loopback_http):
    endpoint, secret = endpoint_create(organisation=people.reseller,
                                       url=f"http://127.0.0.1:{free_tcp_port}/hooks")
    script = tmp_path / "receiver.py"
    script.write_text(_documented_receiver())
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={"WEBHOOK_SECRET": secret, "PORT": str(free_tcp_port),
                                 "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            requests.get(endpoint.url, timeout=1)
            break
        except requests.ConnectionError:
            time.sleep(0.1)
    yield endpoint, proc
    proc.terminate()
    proc.wait(timeout=10)


def test_the_documented_receiver_accepts_a_delivery_and_refuses_a_forgery(receiver):
    endpoint, proc = receiver
    good = endpoint_test_send(endpoint=endpoint)
    assert delivery_attempt(delivery_id=good.pk) is None
    assert good.log.get().status_code == 204
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(secret="whsec_forged")
    forged = endpoint_test_send(endpoint=endpoint)
    assert delivery_attempt(delivery_id=forged.pk) is not None
    assert forged.log.get().status_code == 400
    assert WebhookDelivery.objects.get(pk=forged.pk).state == "pending"
    proc.terminate()
    assert "webhook.test" in proc.communicate(timeout=10)[0]
