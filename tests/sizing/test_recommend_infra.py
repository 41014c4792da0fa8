"""NVMe, network, storage, data format and stack advice; the catalog adapters."""

from dataclasses import replace
from decimal import Decimal

import pytest

from portal.catalog.pricing import HOURS_PER_MONTH
from portal.sizing.catalog_data import catalog_from_dict, catalog_from_seed
from portal.sizing.catalog_live import catalog_from_db
from portal.sizing.recommend import Goal, Workload, get_strategy, infra, recommend
from portal.sizing.recommend.catalog import NetworkOptionSpec
from portal.sizing.recommend.search import size_price


@pytest.fixture(scope="module")
def seed():
    return catalog_from_seed()


def work(**kw):
    return Workload(model="mistral-7b", dataset_tokens=10**9, **kw)


def test_nvme_picks_cheapest_option_that_holds_the_need_and_prefers_raid0(seed):
    opt, warning = infra.choose_nvme(seed.nvme, int(1.5e12))
    assert (opt.size_tb, opt.raid, warning) == (2, "raid0", "")
    opt, warning = infra.choose_nvme(seed.nvme, int(50e12))
    assert opt.size_tb == 10 and "stream the dataset" in warning


def test_single_node_network_is_the_default_unless_the_dataset_takes_hours(seed):
    assert infra.single_node_network(seed.networks, 10 * 10**9).slug == "eth-1g"
    upgraded = infra.single_node_network(seed.networks, 2 * 10**12)
    assert upgraded.speed_gbit_per_s >= 10 and not upgraded.on_request
    assert infra.network_warning(2 * 10**12, seed.network("eth-1g")).startswith("the 2.00 TB dataset takes")
    assert infra.network_warning(10**9, seed.network("eth-1g")) == ""


def test_multi_node_networks_are_infiniband_or_fast_ethernet(seed):
    assert {n.kind for n in infra.multi_node_networks(seed.networks)} == {"infiniband"}
    eth = tuple(n for n in seed.networks if n.kind == "ethernet")
    assert [n.slug for n in infra.multi_node_networks(eth)] == ["eth-100g"]
    assert infra.multi_node_networks((NetworkOptionSpec("eth-1g", "1G", "ethernet", 1, 0.0),)) == ()


def test_storage_sizes_archived_checkpoints(seed):
    assert infra.storage_need_tb(100 * 10**9, 14 * 10**9, 3) == 1
    assert infra.storage_need_tb(1000 * 10**9, 140 * 10**9, 3) == 4  # 70B: ~1 TB per full state
    assert infra.storage_need_tb(1000 * 10**9, 140 * 10**9, 1) == 2  # the bucket keeps one version
    assert infra.choose_storage(seed.storage).kind == "minio"


def test_many_small_files_become_webdataset_shards(seed):
    sku = seed.sku("8x-h100-sxm-80gb")
    advice = infra.data_advice(work(dataset_bytes=200 * 10**9, dataset_files=2_000_000), sku, 2, None)
    assert advice.format == "webdataset"
    assert 0.5e9 <= advice.shard_bytes <= 1e9 and advice.shard_count >= 200
    assert "WebDataset" in advice.message and 2 <= advice.dataloader_workers <= 8
    few = infra.data_advice(work(dataset_bytes=200 * 10**9, dataset_files=2000), sku, 1, None)
    assert few.format == "as-is"


def test_stack_config_has_the_key_values(seed):
    work = Workload(model="mistral-7b", dataset_tokens=10**9)
    z3 = infra.stack_config(get_strategy("zero3-offload"), "deepspeed", tp=1, pp=1, micro_batch=2,
                            grad_accum=8, checkpointing="full", workload=work, catalog=seed)
    settings = dict(z3.settings)
    assert z3.slug == "deepspeed" and settings["zero_optimization.stage"] == 3
    assert settings["zero_optimization.offload_optimizer.device"] == "cpu"
    assert settings["train_micro_batch_size_per_gpu"] == 2 and settings["gradient_accumulation_steps"] == 8
    assert not any("tensor_parallel" in k or "pipeline" in k for k in settings)  # DeepSpeed reads neither
    fsdp = infra.stack_config(get_strategy("fsdp"), "fsdp", tp=1, pp=1, micro_batch=1, grad_accum=4,
                              checkpointing="none", workload=work, catalog=seed)
    assert fsdp.slug == "fsdp" and dict(fsdp.settings)["fsdp_version"] == 2
    titan = dict(infra.stack_config(get_strategy("fsdp"), "torchtitan", tp=2, pp=4, micro_batch=1,
                                    grad_accum=4, checkpointing="selective-op", workload=work,
                                    catalog=seed).settings)
    assert titan["parallelism.tensor_parallel_degree"] == 2
    assert titan["parallelism.pipeline_parallel_degree"] == 4
    assert (titan["activation_checkpoint.mode"], titan["activation_checkpoint.selective_ac_option"]) == (
        "selective", "op")  # the estimator's selective-op is torchtitan's op-level SAC
    assert "training.gradient_accumulation_steps" not in titan  # torchtitan 0.2.2 has no such key
    korthikanti = dict(infra.stack_config(get_strategy("fsdp"), "torchtitan", tp=2, pp=4, micro_batch=1,
                                          grad_accum=4, checkpointing="selective", workload=work,
                                          catalog=seed).settings)
    # torchtitan's selective is its op-level SAC, what the recommender estimates for it (regimes.py)
    assert (korthikanti["activation_checkpoint.mode"],
            korthikanti["activation_checkpoint.selective_ac_option"]) == ("selective", "op")
    assert infra.stack_config(get_strategy("ddp"), "ddp", tp=1, pp=1, micro_batch=4, grad_accum=1,
                              checkpointing="none", workload=work, catalog=seed).slug == "ddp"


def test_seed_catalog_converts_units(seed):
    h100 = seed.gpu("h100-sxm-80gb")
    assert h100.memory_bytes == 80 * 10**9 and h100.nvlink_gbytes_per_s == 900
    assert seed.gpu("l40s-48gb").nvlink_gbytes_per_s is None
    sku = seed.sku("8x-h100-sxm-80gb")
    assert (sku.gpus_per_node, sku.interconnect, sku.price_hourly_usd) == (8, "nvswitch", Decimal("23.60"))
    assert len(seed.skus) == 30


def test_malformed_catalog_data_is_a_value_error():
    with pytest.raises(ValueError, match="missing or malformed"):
        catalog_from_dict({"gpus": []})


@pytest.mark.django_db
def test_db_adapter_matches_the_seed(catalog, seed):
    db = catalog_from_db()
    assert {g.slug: g for g in db.gpus} == {g.slug: g for g in seed.gpus}
    assert {s.slug: replace(s, stock_nodes=None) for s in db.skus} == {s.slug: s for s in seed.skus}
    assert {s.stock_nodes for s in db.skus} <= {None, 0}  # no nodes enrolled in this test
    assert {n.slug for n in db.networks} == {n.slug for n in seed.networks}
    assert {o.slug: o for o in db.nvme} == {o.slug: o for o in seed.nvme}


def test_the_bucket_holds_the_kept_checkpoint_versions_and_the_plan_says_so(seed):
    """storage_tb = kept full training states (+ a model-only export, 10 % spare); the plan
    carries one state's size and the count, and the bucket's price is TB × price per TB."""
    job = Workload(model="llama-3.1-70b", dataset_tokens=10**9)
    plans = {kept: recommend(job, Goal("cheapest"), replace(seed, checkpoints_kept=kept)).best
             for kept in (1, 3)}
    one, three = plans[1], plans[3]
    assert one.checkpoint_bytes == three.checkpoint_bytes > 900 * 10**9  # 70B: ~1 TB per state
    assert (one.checkpoints_kept, three.checkpoints_kept) == (1, 3)
    assert three.storage_tb > one.storage_tb
    assert three.storage_tb * 10**12 >= 3 * three.checkpoint_bytes
    stored = three.to_dict()
    assert (stored["checkpoint_bytes"], stored["checkpoints_kept"]) == (three.checkpoint_bytes, 3)
    provider = next(p for p in seed.storage if p.slug == three.storage_provider)
    sku = next(s for s in seed.skus if s.slug == three.sku)
    network = next((n for n in seed.networks if n.slug == three.network), None)
    nvme = next((o for o in seed.nvme if o.slug == three.nvme_option), None)
    without_bucket = size_price(sku, three.nodes, network, nvme, None, 0).hourly
    bucket_hourly = three.storage_tb * provider.price_per_tb_monthly_usd / HOURS_PER_MONTH
    assert abs(three.price_hourly_usd - without_bucket - bucket_hourly) <= Decimal("0.005")


@pytest.mark.django_db
def test_the_database_catalog_keeps_as_many_checkpoints_as_the_bucket(catalog, settings):
    settings.STORAGE_KEEP_VERSIONS = 5
    assert catalog_from_db().checkpoints_kept == 5
