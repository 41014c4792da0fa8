"""The orders the stack renderers are tested on: every stack, one node and a cluster, Ethernet
and InfiniBand, a real node and a CPU test host, an empty plan and whole plans."""

from __future__ import annotations

from types import SimpleNamespace as NS

from portal.sizing.catalog_data import catalog_from_seed
from provisioning.stack.bundle import RenderedStack, render_stack
from provisioning.stack.inputs import NodeFacts

STACKS = {s.slug: s for s in catalog_from_seed().stack}  # the seed's capabilities and packages

H100 = NS(gpu_count=8, gpu=NS(name="NVIDIA H100 SXM5 80GB"), cpu_cores=112, interconnect="nvswitch")
L4 = NS(gpu_count=2, gpu=NS(name="NVIDIA L4"), cpu_cores=32, interconnect="pcie")

LLAMA_8B_FSDP = {"model": "llama-3.1-8b", "model_spec": {"family": "llama", "hidden_size": 4096},
                 "micro_batch": 4, "grad_accum": 8, "sharding": "fsdp-hybrid", "offload": "none",
                 "checkpointing": "full", "precision": "bf16-mixed", "tp": 1, "pp": 1,
                 "seq_len": 8192}
ZERO3_OFFLOAD = {"model": "mistral-7b", "model_spec": {"family": "llama", "hidden_size": 4096},
                 "micro_batch": 2, "grad_accum": 16, "sharding": "zero3",
                 "offload": "optimizer+params", "checkpointing": "selective",
                 "precision": "bf16-mixed"}
# 16 GPUs / (tp 4 x pp 2 x cp 2) = 1 data-parallel rank: 512 sequences of 8192 tokens per step
# are micro-batch 1 x accumulation 512.
TITAN_70B = {"model": "llama-3.1-70b", "micro_batch": 1, "grad_accum": 512,
             "sharding": "fsdp-full-shard", "offload": "none", "checkpointing": "full",
             "precision": "fp8", "tp": 4, "pp": 2, "cp": 2, "seq_len": 8192,
             "train_tokens": 2_000_000_000_000, "global_batch_tokens": 4_194_304}


def order(strategy: str, *, plan=None, sku=H100, network=("ethernet", 100), tracker="tensorboard",
          storage=True):
    return NS(reference="O-5EED0001", strategy=STACKS[strategy],
              tracker=NS(slug=tracker) if tracker else None, plan=plan or {}, sku=sku,
              network=NS(kind=network[0], speed_gbps=network[1]),
              storage_provider_id=1 if storage else None, has_object_storage=storage)


def node(i: int, *, test_host=False):
    return NS(pk=i, hostname=f"gpu-{i:02d}", fabric_address=f"10.20.0.{i}", driver="ssh",
              driver_options={"test_host": True} if test_host else {},
              management_address=f"192.168.1.{i}:22", nvme_devices=["/dev/nvme0n1", "/dev/nvme1n1"])


CLUSTER = [node(1), node(2)]
IB_FACTS = NodeFacts(socket_ifname="ib0", ib_hcas=("mlx5_0:1", "mlx5_1:1"))
ETH_FACTS = NodeFacts(socket_ifname="ens1f0")


def variants() -> dict[str, RenderedStack]:
    """name -> rendered stack of one node."""
    found = {}
    for strategy in ("ddp", "fsdp", "deepspeed", "torchtitan"):
        found[f"{strategy}-single-empty-plan"] = render_stack(
            order=order(strategy, tracker="", storage=False), node=node(1), nodes=[node(1)])
        found[f"{strategy}-cluster-ib-rank1"] = render_stack(
            order=order(strategy, network=("infiniband", 400)), node=CLUSTER[1], nodes=CLUSTER,
            facts=IB_FACTS)
    found["fsdp-cluster-eth-hybrid"] = render_stack(
        order=order("fsdp", plan=LLAMA_8B_FSDP, network=("ethernet", 100), tracker="wandb"),
        node=CLUSTER[0], nodes=CLUSTER, facts=ETH_FACTS)
    found["deepspeed-single-zero3-offload"] = render_stack(
        order=order("deepspeed", plan=ZERO3_OFFLOAD, tracker="mlflow"), node=node(1), nodes=[node(1)])
    found["torchtitan-cluster-70b-fp8"] = render_stack(
        order=order("torchtitan", plan=TITAN_70B, network=("infiniband", 400)), node=CLUSTER[0],
        nodes=CLUSTER, facts=IB_FACTS)
    test_hosts = [node(1, test_host=True), node(2, test_host=True)]
    found["ddp-test-host-cluster"] = render_stack(
        order=order("ddp", sku=L4, network=("infiniband", 200)), node=test_hosts[1],
        nodes=test_hosts, facts=NodeFacts(socket_ifname="lo"))
    found["fsdp-test-host-single"] = render_stack(
        order=order("fsdp", sku=L4, tracker="", storage=False), node=test_hosts[0],
        nodes=[test_hosts[0]])
    return found
