"""The driver contract's seams for imaging engines, through the pipeline: ``deploy_os`` answers
DeployFacts (new host keys are pinned, with an audit event) and ``release(erase=True)`` lets an
engine erase a node itself (the sanitise script then does not run). The simulated driver plays
such an engine when its options ask; the ssh driver has none (tests/provisioning/test_driver_contract.py)."""

from provisioning.drivers.simulated import read_journal
from provisioning.fulfilment.orders import order_request_termination
from provisioning.models import StepRun
from provisioning.monitoring.health import node_accept_if_healthy
from tests.factories import H100_SKU, approved_order, drain, make_node
from tests.provisioning.sshd import generate_ed25519

NEW_KEY = generate_ed25519()[1]


def test_host_keys_a_new_install_made_are_pinned_with_an_audit_event(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, host_keys_after_deploy=[NEW_KEY])
    order = approved_order(people)
    drain(order.runs.get().pk)
    node.refresh_from_db()
    assert node.state == "active" and node.driver_options["host_key"] == NEW_KEY
    event = node.events.get(transition="pin_host_keys")
    assert event.order == order and "1 host key" in event.note
    deploy = StepRun.objects.get(run__order=order, step="deploy_os")
    assert deploy.result["installed"] is True and deploy.result["host_keys_pinned"] == 1


def test_a_plain_install_pins_nothing(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)
    node.refresh_from_db()
    assert "host_key" not in node.driver_options and not node.events.filter(transition="pin_host_keys")


def _terminate(people, order):
    drain(order.runs.get().pk)
    order_request_termination(order=order, by=people.alice)
    run = order.runs.get(kind="terminate")
    drain(run.pk)
    return run.steps.get(step="sanitise")


def test_an_engine_that_erases_the_node_replaces_the_sanitise_script(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, engine_erases=True)
    sanitise = _terminate(people, approved_order(people))
    node.refresh_from_db()
    assert node.state == "ready" and sanitise.result["erased_by_engine"] is True
    done = [e["name"] for e in read_journal(node.hostname, sim_dir) if e["event"] == "ok"]
    assert "release" in done and "sanitise" not in done


def test_without_an_engine_the_sanitise_script_cleans(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    sanitise = _terminate(people, approved_order(people))
    done = [e["name"] for e in read_journal(node.hostname, sim_dir) if e["event"] == "ok"]
    assert sanitise.result["erased_by_engine"] is False and "sanitise" in done and "release" not in done


def test_an_engine_erased_node_is_attested_and_restocked_on_the_engines_word(catalog, people, sim_dir):
    """No system of ours is left on an erased machine: attest and ready read the engine, not SSH
    (here the machine's own health answer fails once it is handed back)."""
    node = make_node(sku=H100_SKU, state_dir=sim_dir, engine_erases=True)
    order = approved_order(people)
    drain(order.runs.get().pk)
    node.refresh_from_db()
    node.driver_options["fail"] = {"health": {"permanent": "no system on an erased machine"}}
    node.save(update_fields=["driver_options"])
    order_request_termination(order=order, by=people.alice)
    run = order.runs.get(kind="terminate")
    drain(run.pk)
    node.refresh_from_db()
    assert node.state == "ready"
    attest = run.steps.get(step="attest")
    assert attest.result["clean"] is True and attest.result["by_engine"] == "simulated engine: available"
    note = node.events.get(transition="attest").note
    assert note == "erased by its imaging engine; simulated engine: available"
    assert "checked by the next order's acceptance" in "\n".join(
        run.steps.get(step="ready").log_lines.values_list("text", flat=True))


def test_a_node_its_engine_does_not_report_available_stays_out_of_stock(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, engine_erases=True, engine_unavailable=True)
    order = approved_order(people)
    _terminate(people, order)
    node.refresh_from_db()
    attest = order.runs.get(kind="terminate").steps.get(step="attest")
    assert node.state == "failed_attest" and attest.status == "failed"
    assert "does not report it cleaned and available: simulated engine: in maintenance" in attest.error


def test_an_engine_node_enters_stock_on_the_engines_word_without_a_baseline(catalog, people, sim_dir):
    available = make_node(sku=H100_SKU, state_dir=sim_dir, state="enrolled", engine_erases=True)
    held = make_node(sku=H100_SKU, state_dir=sim_dir, state="enrolled", engine_erases=True,
                     engine_unavailable=True)
    assert node_accept_if_healthy(node=available, by=people.olga).ok is True
    available.refresh_from_db()
    assert available.state == "ready" and available.baseline_at is None
    assert "available in its imaging engine" in available.events.get(transition="accept").note
    check = node_accept_if_healthy(node=held, by=people.olga)
    held.refresh_from_db()
    assert held.state == "enrolled" and check.ok is False
    assert check.problems == ["not available in its imaging engine: simulated engine: in maintenance"]
