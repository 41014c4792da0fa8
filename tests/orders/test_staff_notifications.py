"""Staff hear what they must act on: approvers of orders waiting for approval, operators of
failed provisioning and unhealthy nodes (e-mail through a Celery task after commit), and the
staff navigation counts them."""

from django.core import mail

from portal.accounts.tasks import staff_notify_task
from provisioning.monitoring.health import node_health_check
from tests.factories import H100_SKU, approved_order, drain, make_node, staff, submitted_order


def _run_queued(callbacks, monkeypatch):
    """Runs the queued tasks in this process, as a worker would."""
    sent = []
    monkeypatch.setattr(staff_notify_task, "delay", lambda *a: sent.append(staff_notify_task(*a)))
    for callback in callbacks:
        callback()
    return sent


def test_a_new_order_waiting_for_approval_mails_the_approvers_after_commit(
        people, catalog, monkeypatch, django_capture_on_commit_callbacks, settings):
    settings.SITE_URL = "http://portal.example:8000"
    people.sam.email, people.olga.email = "sam@example.com", "olga@example.com"
    people.sam.save(), people.olga.save()
    with django_capture_on_commit_callbacks() as callbacks:
        order = submitted_order(people)
    assert not [m for m in mail.outbox if "staff" in m.subject]  # nothing before the commit
    _run_queued(callbacks, monkeypatch)
    staff_mail = [m for m in mail.outbox if m.subject.startswith("[Trainyard staff]")]
    assert len(staff_mail) == 1 and staff_mail[0].to == ["sam@example.com"]
    assert order.reference in staff_mail[0].subject
    assert "http://portal.example:8000/ops/approvals/" in staff_mail[0].body


def test_a_node_that_turns_unhealthy_mails_the_operators_once(people, catalog, sim_dir, monkeypatch,
                                                             django_capture_on_commit_callbacks):
    people.olga.email = "olga@example.com"
    people.olga.save()
    node = make_node(sku=H100_SKU, state_dir=sim_dir, gpu_count=7)
    with django_capture_on_commit_callbacks() as callbacks:
        node_health_check(node=node)
        node_health_check(node=node)  # still unhealthy: no second mail
    _run_queued(callbacks, monkeypatch)
    staff_mail = [m for m in mail.outbox if m.subject.startswith("[Trainyard staff]")]
    assert [m.to for m in staff_mail] == [["olga@example.com"]]
    assert "7 of 8 GPUs visible" in staff_mail[0].body


def test_the_staff_navigation_counts_the_queue_and_failures(people, catalog, sim_dir, login):
    submitted_order(people)
    make_node(sku=H100_SKU, state_dir=sim_dir, state="failed_deploy")
    sam_page = login(people.sam).get("/ops/approvals/").content.decode()
    assert 'title="orders waiting for approval">1<' in sam_page
    olga_page = login(people.olga).get("/ops/nodes/").content.decode()
    assert 'title="failed runs and nodes">1<' in olga_page
    assert "nav-badge" not in login(people.alice).get("/orders/").content.decode()


def test_the_staff_start_page_speaks_of_queue_failures_and_stock(people, catalog, sim_dir, login):
    order = submitted_order(people)
    make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-bad-01", state="failed_validation")
    both = staff("approver", username="root", is_superuser=True)
    html = login(both).get("/").content.decode()
    assert "Approval queue" in html and order.reference in html
    assert "Failures" in html and "gpu-bad-01" in html and "Stock" in html
    assert "Your servers" not in html


def test_a_failed_provisioning_mails_the_operators_a_link_to_the_run_they_can_open(
        people, catalog, sim_dir, monkeypatch, django_capture_on_commit_callbacks, settings, login):
    """It linked to /ops/approvals/, which is a 403 for operators: it opens the run now."""
    settings.SITE_URL = "http://portal.example"
    people.olga.email = "olga@example.com"
    people.olga.save()
    make_node(sku=H100_SKU, state_dir=sim_dir, fail={"deploy_os": {"permanent": "no image"}})
    with django_capture_on_commit_callbacks() as callbacks:
        order = approved_order(people)
        drain(order.runs.get().pk)
    _run_queued(callbacks, monkeypatch)
    [failed] = [m for m in mail.outbox if "Provisioning of" in m.subject]
    run = order.runs.get()
    assert failed.to == ["olga@example.com"] and order.reference in failed.subject
    link = f"/ops/runs/{run.pk}/"
    assert f"http://portal.example{link}" in failed.body and "no image" in failed.body
    assert login(people.olga).get(link).status_code == 200
