"""The server page lists the files the stack step put on each node and serves each one, rendered
again on demand, with the SHA-256 the step recorded. Only the order's organisation sees them."""

import hashlib

from provisioning.models import StepRun
from tests.orders.test_server_page import page


def test_the_server_page_lists_and_serves_every_rendered_file(login, people, active):
    step = StepRun.objects.get(run__order=active, step="stack")
    recorded = {f["name"]: f["sha256"] for f in step.result["files"]}
    assert {"bootstrap.sh", "env.sh", "nccl.conf", "launch.sh", "accelerate.yaml"} <= set(recorded)
    client = login(people.alice)
    response, html = page(client, f"/orders/{active.reference}/server/")
    assert "Training environment files" in html
    for name, sha in recorded.items():
        url = f"/orders/{active.reference}/server/files/gpu-h100-a01/{name}"
        assert url in html and sha[:14] in html
        download = client.get(url)
        assert download.status_code == 200, name
        assert hashlib.sha256(download.content).hexdigest() == sha, name
        assert download["X-Content-SHA256"] == sha
    env = client.get(f"/orders/{active.reference}/server/files/gpu-h100-a01/env.sh").content.decode()
    assert "export NPROC_PER_NODE=8" in env and "export MASTER_ADDR=127.0.0.1" in env


def test_an_unknown_file_is_404(login, people, active):
    response = login(people.alice).get(
        f"/orders/{active.reference}/server/files/gpu-h100-a01/id_rsa")
    assert response.status_code == 404


def test_a_file_that_renders_differently_now_is_not_served_as_deployed(login, people, active):
    step = StepRun.objects.get(run__order=active, step="stack")
    step.result["files"] = [dict(f, sha256="0" * 64) if f["name"] == "env.sh" else f
                            for f in step.result["files"]]
    step.save(update_fields=["result"])
    response = login(people.alice).get(
        f"/orders/{active.reference}/server/files/gpu-h100-a01/env.sh")
    assert response.status_code == 409 and b"re-deploy" in response.content


def test_an_outsider_gets_404(login, people, active):
    response = login(people.charlie).get(
        f"/orders/{active.reference}/server/files/gpu-h100-a01/env.sh")
    assert response.status_code == 404
