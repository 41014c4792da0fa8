"""What the customer's progress card reads: one line per step in plain words (issue 29, item 1).
Script text, driver options, accounts and the provider's canary bucket stay in the staff log."""

import pytest

from portal.orders.states import OrderState
from provisioning.fulfilment.orders import order_request_termination
from provisioning.fulfilment.selectors import order_progress
from provisioning.models import ProvisioningRun
from provisioning.states import STEPS, RunKind
from tests.factories import H100_SKU, approved_order, drain, make_node


def _lines(progress):
    return {step.name: list(step.log_lines) for node in progress.nodes for step in node.steps}


@pytest.mark.parametrize("kind", [RunKind.PROVISION, RunKind.TERMINATE])
def test_the_customer_reads_one_true_line_per_step_and_staff_the_detail(
        kind, catalog, people, sim_dir, storage_provider, embedded_s3, settings):
    make_node(sku=H100_SKU, state_dir=sim_dir, login_user="opsadmin")
    order = approved_order(people, storage="minio", storage_tb=2, network="eth-1g")
    drain(order.runs.get().pk)
    if kind == RunKind.TERMINATE:
        order_request_termination(order=order, by=people.alice)
        drain(ProvisioningRun.objects.get(order=order, kind=RunKind.TERMINATE).pk)
    order.refresh_from_db()
    assert order.state == (OrderState.ACTIVE if kind == RunKind.PROVISION else OrderState.TERMINATED)
    customer = _lines(order_progress(order))
    assert list(customer) == [spec.name for spec in STEPS[kind]]
    for step, lines in customer.items():
        assert len(lines) == 1, (step, lines)
        text = lines[0]
        assert text[0].isupper(), text  # a sentence, not a command echo
        for internal in ("$", "InfiniBand", "canary", "opsadmin", "login_user", "driver",
                         "simulated", "running", "PASS", "echo"):
            assert internal not in text, (step, text)
    if kind == RunKind.PROVISION:
        assert customer["storage"][0].startswith("Bucket ") and " ready at " in customer["storage"][0]
        assert customer["acceptance"][0].startswith("Acceptance test passed: ")
    else:
        assert "kept until" in customer["retain_data"][0]
    staff_text = "\n".join(line for lines in _lines(order_progress(order, staff=True)).values()
                           for line in lines)
    assert "$ running" in staff_text  # the scripts' output is still there for staff
    for lines in customer.values():
        assert lines[0] in staff_text
