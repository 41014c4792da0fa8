"""An ssh node that fails its check into stock (issue 29, item 9): the operator's node page says
what went wrong (the driver's error, the address and the port), operators get an e-mail, and
the customer's sentence ("our operators have been told") is not what an operator reads."""

import socket

from django.core import mail
from django.urls import reverse

from portal.accounts.tasks import staff_notify_task
from portal.catalog.models import ServerSKU
from provisioning.models import Node
from provisioning.monitoring.health import node_accept_if_healthy
from provisioning.states import NodeState
from provisioning.webhooks import UNREACHABLE_TEXT
from tests.factories import H100_SKU, verified_login

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def _closed_port() -> int:
    with socket.socket() as s:  # bound, then released: nothing listens there now
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_operator_reads_the_diagnosis_and_gets_an_email(people, catalog, client, monkeypatch,
                                                            django_capture_on_commit_callbacks):
    people.olga.email = "olga@example.com"
    people.olga.save()
    port = _closed_port()
    node = Node.objects.create(
        hostname="gpu-ssh-01", sku=ServerSKU.objects.get(slug=H100_SKU), driver="ssh",
        management_address=f"127.0.0.1:{port}", state=NodeState.ENROLLED,
        driver_options={"host_key": HOST_KEY}, nvme_devices=["/dev/nvme0n1"])
    sent = []
    monkeypatch.setattr(staff_notify_task, "delay", lambda *a: sent.append(staff_notify_task(*a)))
    with django_capture_on_commit_callbacks(execute=True):
        check = node_accept_if_healthy(node=node, by=people.olga)
    node.refresh_from_db()
    assert not check.ok and node.state == NodeState.ENROLLED
    assert check.problems == [UNREACHABLE_TEXT]  # what a customer would read

    verified_login(client, people.olga)
    html = client.get(reverse("provisioning:node", args=[node.pk])).content.decode()
    assert f"could not reach 127.0.0.1 port {port} with the ssh driver: " in html
    assert "operators have been told" not in html

    [email] = [m for m in mail.outbox if m.subject.startswith("[Trainyard staff]")]
    assert email.to == ["olga@example.com"] and "gpu-ssh-01" in email.subject
    assert f"127.0.0.1 port {port}" in email.body and f"/ops/nodes/{node.pk}/" in email.body
