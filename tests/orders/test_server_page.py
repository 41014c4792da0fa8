"""The customer's day-2 server page: access (ssh line per node), acceptance report, health,
reboot and re-deploy. An outsider gets 404."""

import pytest
from django.utils import timezone

from provisioning.fulfilment.ssh_keys import active_email_lines
from provisioning.models import Node, ProvisioningRun, StepRun
from provisioning.monitoring import health
from provisioning.pipeline.context import StepContext
from provisioning.pipeline.steps.handover import HandoverResult, handover
from provisioning.states import RunKind
from tests.provisioning.sshd import fingerprint_sha256


def page(client, url):
    response = client.get(url)
    return response, response.content.decode()


def test_the_server_page_shows_access_report_and_health(login, people, active):
    node = active.nodes.get()
    health.node_health_check(node=node)
    response, html = page(login(people.alice), f"/orders/{active.reference}/server/")
    assert response.status_code == 200
    # A simulated node has no machine behind it: the page says so instead of a fake ssh line.
    assert "gpu-h100-a01" in html and "Simulated node" in html
    assert f"ssh {node.management_address.split(':')[0]}" not in html and "ssh -p" not in html
    assert "Acceptance report" in html and "Passed" in html and "GPUs visible" in html
    assert "8 of 8" in html and "°C" in html and "uncorrected" in html
    assert "Reboot" in html and "Re-deploy stack" in html and "Terminate" in html


def _handed_over_ssh_node(order, **node_fields):
    """An ssh-driven node serving ``order`` whose handover step ran (no I/O: handover only reads
    the node and its driver options)."""
    run = order.runs.get(kind=RunKind.PROVISION)
    node = Node.objects.create(sku=order.sku, driver="ssh", state="active", order=order,
                               **node_fields)
    sr = StepRun.objects.create(run=run, node=node, step="handover", position=6)
    ctx = StepContext(run=run, order=order, node=node, step_run=sr, log=lambda line: None)
    result = handover(ctx)
    StepRun.objects.filter(pk=sr.pk).update(status="succeeded", finished_at=timezone.now(),
                                            result=result.to_dict())
    return node, result


def test_the_server_page_shows_a_usable_ssh_line_for_a_real_node(login, people, active):
    node, result = _handed_over_ssh_node(active, hostname="gpu-real-01",
                                         management_address="host:2222",
                                         driver_options={"login_user": "user"})
    assert (result.ssh_user, result.ssh_host, result.ssh_port, result.address) == (
        "user", "host", 2222, "host:2222")
    assert not result.simulated
    html = login(people.alice).get(f"/orders/{active.reference}/server/").content.decode()
    assert "<code class=\"copy\">ssh -p 2222 user@host</code>" in html
    assert "gpu-real-01" in html and "Simulated node" in html  # the simulated one says so


def test_the_server_page_and_the_active_email_show_the_pinned_host_key(login, people, active,
                                                                      sshd_host):
    """The customer compares it at the first login: never trust-on-first-use."""
    _, result = _handed_over_ssh_node(active, hostname="gpu-real-02", management_address="host",
                                      driver_options={"host_key": sshd_host.host_public_key})
    fingerprint = f"ED25519 {fingerprint_sha256(sshd_host.host_public_key)}"
    assert result.host_key_fingerprints == (fingerprint,)
    html = login(people.alice).get(f"/orders/{active.reference}/server/").content.decode()
    assert f'Host key <code class="fingerprint">{fingerprint}</code>' in html
    body = "\n".join(active_email_lines(active))
    assert f"host key {fingerprint} (compare it at your first login)" in body


def test_the_access_line_uses_the_login_user_setting_and_omits_port_22(login, people, active,
                                                                      settings):
    settings.PROVISIONING_LOGIN_USER = "trainer"
    _handed_over_ssh_node(active, hostname="gpu-real-02", management_address="10.1.2.3")
    html = login(people.alice).get(f"/orders/{active.reference}/server/").content.decode()
    assert "ssh trainer@10.1.2.3" in html


def test_older_handover_rows_still_read():
    old = HandoverResult.from_dict({"hostname": "gpu-a01", "address": "10.0.0.7",
                                    "handed_over_at": "2025-01-01T00:00:00+00:00"})
    assert (old.ssh_host, old.ssh_port, old.simulated) == ("10.0.0.7", 22, False)
    assert old.ssh_command == "ssh 10.0.0.7"
    simulated = HandoverResult.from_dict({"hostname": "sim-1x-l4-24gb-01",
                                          "address": "sim://sim-1x-l4-24gb-01"})
    assert simulated.simulated  # never "ssh -p //sim-1x-l4-24gb-01 sim"
    assert HandoverResult.from_dict(HandoverResult(ssh_host="h", ssh_port=2222, ssh_user="u")
                                    .to_dict()).ssh_command == "ssh -p 2222 u@h"


def test_the_server_page_is_for_active_orders(login, people, placed):
    response = login(people.alice).get(f"/orders/{placed.reference}/server/")
    assert response.status_code == 302 and response.url == f"/orders/{placed.reference}/"


@pytest.mark.parametrize("action,kind", [("reboot", RunKind.REBOOT),
                                         ("redeploy", RunKind.REDEPLOY_STACK)])
def test_day2_actions_start_a_run(login, people, active, action, kind):
    confirmed = {"confirm": "yes"}
    response = login(people.alice).post(f"/orders/{active.reference}/server/{action}/", confirmed,
                                        follow=True)
    assert ProvisioningRun.objects.filter(order=active, kind=kind).count() == 1
    assert "follow it below" in response.content.decode()
    again = login(people.alice).post(f"/orders/{active.reference}/server/{action}/", confirmed,
                                     follow=True)
    assert "already in progress" in again.content.decode()
    assert ProvisioningRun.objects.filter(order=active, kind=kind).count() == 1


@pytest.mark.parametrize("action,kind,word", [("reboot", RunKind.REBOOT, "reboot"),
                                              ("redeploy", RunKind.REDEPLOY_STACK, "re-deploy")])
def test_day2_actions_that_stop_jobs_need_a_confirmation(login, people, active, action, kind, word):
    response = login(people.alice).post(f"/orders/{active.reference}/server/{action}/", follow=True)
    assert f"Nothing was done: confirm the {word} first" in response.content.decode()
    assert not ProvisioningRun.objects.filter(order=active, kind=kind).exists()


def test_the_confirmations_say_what_stops_and_what_is_kept(login, people, active):
    _, html = page(login(people.alice), f"/orders/{active.reference}/server/")
    assert "Reboot…</summary>" in html and "Re-deploy stack…</summary>" in html
    assert html.count("<strong>What stops:</strong>") == 2
    assert "your training jobs included" in html and "Yes, reboot now" in html
    assert "the acceptance test uses every GPU" in html and "Yes, re-deploy" in html
    assert html.count('name="confirm" value="yes"') == 2
