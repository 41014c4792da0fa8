"""The stack step through the pipeline: a 2-node cluster order renders each node's files with
its own rank and the first node's fabric address, records every file's SHA-256, and the server
page serves the same bytes."""

import hashlib

import pytest

from provisioning.fulfilment.approvals import order_approve
from provisioning.models import Node, StepRun
from provisioning.stack.selectors import stack_downloads, stack_file
from provisioning.states import StepStatus
from tests.factories import H100_SKU, drain, make_node, submitted_order


@pytest.mark.django_db
def test_a_cluster_gets_a_rank_per_node_and_the_fabric_master(catalog, people, sim_dir):
    first = make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="leaf-1", hostname="gpu-c1")
    make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="leaf-1", hostname="gpu-c2")
    Node.objects.filter(pk=first.pk).update(fabric_address="10.40.0.1")
    order = order_approve(order=submitted_order(people, node_count=2, network="ib-ndr-400g"),
                          by=people.sam)
    drain(order.runs.get().pk)
    steps = StepRun.objects.filter(run__order=order, step="stack").order_by("node__hostname")
    assert [s.status for s in steps] == [StepStatus.SUCCEEDED] * 2
    assert [(n.hostname, n.rank) for n in stack_downloads(order)] == [("gpu-c1", 0), ("gpu-c2", 1)]
    for rank, step in enumerate(steps):
        env = stack_file(order, hostname=step.node.hostname, name="env.sh")
        recorded = {f["name"]: f["sha256"] for f in step.result["files"]}
        assert hashlib.sha256(env.content.encode()).hexdigest() == recorded["env.sh"]
        assert f"export NODE_RANK={rank}\n" in env.content
        assert "export MASTER_ADDR=10.40.0.1\n" in env.content  # the fabric, as recorded
        assert "export WORLD_SIZE=16\n" in env.content
        accelerate = stack_file(order, hostname=step.node.hostname, name="accelerate.yaml")
        assert f"machine_rank: {rank}\n" in accelerate.content


@pytest.mark.django_db
def test_a_simulated_cluster_without_fabric_addresses_uses_its_management_hosts(catalog, people,
                                                                               sim_dir):
    """Simulated nodes have no network; a real node without one is refused (test_renderers)."""
    nodes = [make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="leaf-2", hostname=name)
             for name in ("gpu-r1", "gpu-r2")]
    order = order_approve(order=submitted_order(people, node_count=2), by=people.sam)
    drain(order.runs.get().pk)
    env = stack_file(order, hostname="gpu-r2", name="env.sh")
    master = nodes[0].management_address.split(":")[0]
    assert f"export MASTER_ADDR={master}\n" in env.content and "export NODE_RANK=1\n" in env.content


@pytest.mark.django_db
def test_a_redeploy_with_a_node_out_of_service_still_renders_the_whole_cluster(catalog, people,
                                                                              sim_dir):
    """The run covers the active node only; its env.sh still names both nodes (before, it said
    NNODES=1 and the remaining node took rank 0 whatever its place)."""
    from provisioning.fulfilment import day2
    from provisioning.models import ProvisioningRun

    make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="leaf-3", hostname="gpu-d1")
    make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="leaf-3", hostname="gpu-d2")
    order = order_approve(order=submitted_order(people, node_count=2), by=people.sam)
    drain(order.runs.get().pk)
    Node.objects.filter(hostname="gpu-d1").update(state="maintenance")  # out for repair
    run = day2.server_redeploy_stack(order=order, by=people.alice)
    assert set(run.steps.values_list("node__hostname", flat=True)) == {"gpu-d2"}
    drain(run.pk)
    step = StepRun.objects.get(run=run, step="stack")
    assert step.status == StepStatus.SUCCEEDED
    assert step.result["cluster"] == ["gpu-d1", "gpu-d2"]
    env = stack_file(order, hostname="gpu-d2", name="env.sh").content
    assert "export NNODES=2\n" in env and "export NODE_RANK=1\n" in env
    assert ProvisioningRun.objects.get(pk=run.pk).kind == "redeploy_stack"
