"""plan_to_configuration: the server a plan names, by the slugs it carries (no guessing)."""

import pytest

from portal.quotes.plans import plan_check, plan_to_configuration
from portal.sizing.catalog_live import catalog_from_db
from portal.sizing.recommend import Goal, SearchOptions, Workload, recommend


@pytest.fixture
def plan(catalog):
    work = Workload(model="llama-3.1-70b", dataset_tokens=10**10, seq_len=4096)
    return recommend(work, Goal("fastest"), catalog_from_db(), SearchOptions(top_n=1)).best.to_dict()


def test_a_plan_names_every_part_of_the_configuration(plan):
    config = plan_to_configuration(plan)
    assert config.sku.slug == plan["sku"] and config.node_count == plan["nodes"]
    assert config.network.slug == plan["network"]
    assert config.nvme.slug == plan["nvme_option"]
    assert config.storage_provider.slug == plan["storage_provider"]
    assert config.storage_tb >= plan["storage_tb"]
    assert config.strategy.slug == plan["stack"]


def test_a_versioned_plan_is_stored_as_given_when_it_reads_back_whole(plan):
    assert plan_check(plan) == plan
    with pytest.raises(ValueError, match="lacks seq_len"):
        plan_check({k: v for k, v in plan.items() if k != "seq_len"})


@pytest.mark.parametrize("plan", [
    {"network": "infiniband-400", "stack": "zero3 please"},  # no slugs: nothing is guessed
    {"network": {"slug": "ib-ndr-400g"}, "nodes": "2"},
])
def test_parts_a_plan_does_not_name_get_the_defaults(catalog, plan):
    config = plan_to_configuration(plan)
    assert config.node_count == 1 and config.sku is None
    assert config.network.slug == "eth-1g" and config.strategy is None
    assert config.storage_tb == 0 and config.storage_provider is None
