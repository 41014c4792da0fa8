"""The acceptance report on the server page and in GET /api/v1/orders/<ref>/server: the checks
table with numbers, the loss sparkline, versions; a report stored before train-smoke still reads;
an outsider gets 404."""

from django.utils import timezone

from provisioning.fulfilment.selectors import acceptance_report
from provisioning.models import StepRun
from tests.api.conftest import key_client
from tests.factories import H100_SKU, approved_order, drain, make_node

# A row as the acceptance step wrote it before train-smoke: health checks and a script tail.
OLD_ROW = {"report": {"passed": True, "gpu_count": 8, "expected_gpu_count": 8, "ecc_errors": 0,
                      "max_temperature_c": 44.0, "output_tail": ["found $found GPU(s)"],
                      "checks": [{"name": "acceptance script", "ok": True, "detail": "exit status 0"},
                                 {"name": "GPUs visible", "ok": True, "detail": "8 of 8"}]}}


def test_the_page_shows_the_checks_the_loss_sparkline_and_that_it_was_simulated(login, people, active):
    html = login(people.alice).get(f"/orders/{active.reference}/server/").content.decode()
    assert "Acceptance report" in html and "Passed" in html and "Simulated" in html
    assert "no real training job ran" in html
    assert "FSDP2 loss falls" in html and "DDP loss falls" in html and "Sharded checkpoint round trip" in html
    assert html.count('<polyline class="spark-') == 2 and 'aria-label="Training loss over 30 steps' in html
    assert "PyTorch" in html and "2.13.0" in html and "NVIDIA driver" in html
    assert "$found" not in html


def test_the_api_answers_the_typed_report(people, active):
    body = key_client(active.organisation).get(f"/api/v1/orders/{active.reference}/server").json()
    report = body["acceptance"]
    assert report["passed"] is True and report["simulated"] is True
    assert len(report["fsdp_losses"]) == 30 and report["fsdp_losses"][-1] < report["fsdp_losses"][0]
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["FSDP2 loss falls"]["status"] == "pass" and checks["FSDP2 loss falls"]["unit"] == "fraction"
    assert checks["GPUs visible"]["node"] == "gpu-h100-a01" and checks["GPUs visible"]["value"] == 8
    assert report["checkpoint"]["mismatched"] == 0 and report["versions"]["torch"] == "2.13.0"


def test_an_outsider_gets_404(people, active):
    response = key_client(people.outsider_org).get(f"/api/v1/orders/{active.reference}/server")
    assert response.status_code == 404


def test_a_report_stored_before_train_smoke_still_reads(login, people, active):
    StepRun.objects.filter(run__order=active, step="acceptance").update(result=OLD_ROW,
                                                                        finished_at=timezone.now())
    report = acceptance_report(active)
    assert report.passed and not report.trained and report.sparkline is None
    assert [c.outcome for c in report.checks] == ["pass", "pass"]
    html = login(people.alice).get(f"/orders/{active.reference}/server/").content.decode()
    assert "GPUs visible" in html and "8 of 8" in html and '<polyline class="spark-' not in html
    assert "$found" not in html  # the old script's unexpanded tail is not shown any more
    body = key_client(active.organisation).get(f"/api/v1/orders/{active.reference}/server").json()
    assert body["acceptance"]["checks"][1] == {"name": "GPUs visible", "ok": True, "detail": "8 of 8",
                                               "status": "pass", "node": "", "value": None,
                                               "threshold": None, "unit": ""}


def test_a_failed_acceptance_is_reported_with_its_reason(people, catalog, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, gpu_count=7)
    order = approved_order(people)
    drain(order.runs.get().pk)
    order.refresh_from_db()
    assert order.state == "provision_failed"
    assert f"{node.hostname}: GPUs visible (7 of 8)" in order.failure_reason
    body = key_client(order.organisation).get(f"/api/v1/orders/{order.reference}/server").json()
    report = body["acceptance"]
    assert report["passed"] is False
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert [(c["name"], c["value"], c["threshold"]) for c in failed] == [("GPUs visible", 7, 8)]
