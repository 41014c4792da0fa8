"""Stack options declare what they can run and the packages the node installs."""

import re

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from packaging.requirements import Requirement

from portal.catalog.models import StackOption
from portal.catalog.services import catalog_seed, load_seed
from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.catalog_live import catalog_from_db

BEFORE = ("catalog", "0002_storageprovider_region_addressing")
AFTER = ("catalog", "0003_stackoption_capabilities")
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(.+)$")


def test_seeded_stacks_declare_their_capabilities(db):
    catalog_seed()
    slugs = ("ddp", "fsdp", "deepspeed", "torchtitan")
    ddp, fsdp, ds, titan = (StackOption.objects.get(slug=s) for s in slugs)
    assert ddp.data_parallel == ["ddp"] and not ddp.tensor_parallel and ddp.qlora
    assert fsdp.data_parallel == ["fsdp2-full-shard", "fsdp2-hybrid-shard"] and fsdp.cpu_offload
    assert ds.data_parallel == ["zero1", "zero2", "zero3"] and ds.cpu_offload
    assert not (ds.tensor_parallel or ds.pipeline_parallel)
    assert titan.kind == "strategy" and titan.tensor_parallel and titan.pipeline_parallel
    assert titan.context_parallel and titan.sequence_parallel and titan.fp8 and not titan.qlora
    assert "tensor parallelism" in titan.features
    # torchtitan 0.2.2 builds its own models: of those this portal sizes llama3 only.
    assert titan.model_families == ["llama3"] and titan.op_level_checkpointing
    for hf in (ddp, fsdp, ds):
        assert {"llama3", "llama", "mistral", "mixtral", "qwen2"} <= set(hf.model_families)
        assert not hf.op_level_checkpointing


def test_every_strategy_stack_pins_torch_and_its_framework(db):
    catalog_seed()
    frameworks = {"fsdp": "accelerate", "deepspeed": "deepspeed", "torchtitan": "torchtitan"}
    for option in StackOption.objects.filter(kind="strategy"):
        pins = dict(PIN.match(p).groups() for p in option.packages)
        assert pins["torch"] == "2.13.0", option.slug
        if option.slug in frameworks:
            assert frameworks[option.slug] in pins, option.slug
        option.full_clean()  # the validators accept the seed


def test_the_database_catalog_reaches_the_recommender_like_the_seed(db):
    catalog_seed()
    from_db = {s.slug: s for s in catalog_from_db().stack}
    from_seed = {s.slug: s for s in catalog_from_seed().stack}
    assert from_db == from_seed


@pytest.mark.parametrize(("field", "value", "message"), [
    ("data_parallel", ["zero4"], "unknown data-parallel kind 'zero4'"),
    ("data_parallel", "ddp", "must be a list"),
    ("packages", ["torch>=2.0"], "not a pinned requirement"),
    ("model_families", ["mistrall"], "unknown model family 'mistrall'"),
    ("model_families", "llama3", "must be a list"),
    ("packages", "torch==2.13.0", "must be a list"),
])
def test_a_bad_capability_is_refused_with_a_clear_error(db, field, value, message):
    catalog_seed()
    option = StackOption.objects.get(slug="ddp")
    setattr(option, field, value)
    with pytest.raises(ValidationError, match=message):
        option.full_clean()


def test_a_bad_seed_row_is_refused_and_loses_nothing(db):
    catalog_seed()
    data = load_seed()
    for row in data["stack"]:
        if row["slug"] == "deepspeed":
            row["packages"] = ["deepspeed"]
    with pytest.raises(ValueError, match="'deepspeed' is not a pinned requirement"):
        catalog_seed(data=data)
    assert StackOption.objects.get(slug="deepspeed").packages[1] == "deepspeed==0.19.8"


def test_the_migration_declares_capabilities_on_existing_rows_in_place(transactional_db):
    """A catalog stored before capabilities existed: the rows keep their ids (quotes and orders
    point at them) and gain their capabilities; torchtitan is added."""
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    try:
        old = executor.loader.project_state([BEFORE]).apps.get_model("catalog", "StackOption")
        ids = {slug: old.objects.create(slug=slug, name=slug.upper(), kind="strategy").pk
               for slug in ("ddp", "fsdp", "deepspeed")}
        old.objects.create(slug="wandb", name="W&B", kind="tracker")
        executor = MigrationExecutor(connection)
        executor.migrate([AFTER])
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    for slug, pk in ids.items():
        option = StackOption.objects.get(pk=pk)
        assert option.slug == slug and option.name == slug.upper() and option.data_parallel
    assert StackOption.objects.get(slug="deepspeed").data_parallel == ["zero1", "zero2", "zero3"]
    assert StackOption.objects.get(slug="torchtitan").pipeline_parallel
    assert StackOption.objects.get(slug="wandb").data_parallel == []


def test_every_seeded_package_is_one_exact_pin_as_pip_reads_it():
    rows = [r for r in load_seed()["stack"] if r["kind"] == "strategy"]
    for text in sorted({p for r in rows for p in r["packages"]}):
        req = Requirement(text)
        assert [s.operator for s in req.specifier] == ["=="], text


def test_the_family_migration_declares_families_on_existing_rows(transactional_db):
    before = ("catalog", "0004_serversku_nccl_busbw_gbps")
    after = ("catalog", "0005_stackoption_model_families")
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    try:
        old = executor.loader.project_state([before]).apps.get_model("catalog", "StackOption")
        ids = {slug: old.objects.create(slug=slug, name=slug, kind="strategy").pk
               for slug in ("fsdp", "torchtitan", "custom")}
        executor = MigrationExecutor(connection)
        executor.migrate([after])
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert StackOption.objects.get(pk=ids["torchtitan"]).model_families == ["llama3"]
    assert "mistral" in StackOption.objects.get(pk=ids["fsdp"]).model_families
    assert StackOption.objects.get(pk=ids["custom"]).model_families == []  # declares none yet


@pytest.mark.parametrize("before, after, built, grown, cleared_everywhere", [
    # Qwen3, Qwen3-MoE and Phi-3 after Qwen2 (going back, from the rows beside Qwen2 only)
    ("0007_resale_prices", "0008_stackoption_qwen3_phi3", ["llama3", "llama", "qwen2", "bert"],
     ["llama3", "llama", "qwen2", "qwen3", "qwen3_moe", "phi3", "bert"], False),
    # Gemma and Gemma 3 after Phi-3
    ("0008_stackoption_qwen3_phi3", "0009_stackoption_gemma", ["llama", "qwen2", "phi3", "bert"],
     ["llama", "qwen2", "phi3", "gemma", "gemma3_text", "bert"], True),
    # Gemma 2 after Gemma
    ("0009_stackoption_gemma", "0010_stackoption_gemma2", ["llama", "qwen2", "gemma", "bert"],
     ["llama", "qwen2", "gemma", "gemma2", "bert"], True),
])
def test_a_family_migration_adds_them_in_place_where_a_stack_builds_the_one_beside(
        transactional_db, before, after, built, grown, cleared_everywhere):
    """A catalog migrated before the new families: the Hugging Face stacks gain them in place;
    torchtitan and a stack an operator narrowed keep what they declared; processes reload it; back
    again, they leave and the rest stays in place (0009: from every row, older code lacks them)."""
    before, after = ("catalog", before), ("catalog", after)
    executor = MigrationExecutor(connection)
    executor.migrate([before])
    try:
        apps = executor.loader.project_state([before]).apps
        old, version = apps.get_model("catalog", "StackOption"), apps.get_model("catalog", "CatalogVersion")
        old.objects.all().delete()
        hf = old.objects.create(slug="fsdp", name="FSDP", kind="strategy", model_families=built)
        narrowed = old.objects.create(slug="ddp", name="DDP", kind="strategy", model_families=["llama"])
        other = old.objects.create(slug="custom", name="Custom", kind="strategy", model_families=["bert"])
        titan = old.objects.create(slug="torchtitan", name="torchtitan", kind="strategy",
                                   model_families=["llama3"])
        version.objects.update_or_create(pk=1, defaults={"version": 41})
        executor = MigrationExecutor(connection)
        executor.migrate([after])
        migrated = executor.loader.project_state([after]).apps.get_model("catalog", "StackOption")
        assert migrated.objects.get(pk=hf.pk).model_families == grown
        assert migrated.objects.get(pk=narrowed.pk).model_families == ["llama"]
        assert migrated.objects.get(pk=titan.pk).model_families == ["llama3"]
        assert version.objects.get(pk=1).version == 42
        # an operator lets another stack build them too: going back, no row keeps what older code lacks
        migrated.objects.filter(pk=other.pk).update(model_families=["bert", *grown[len(built) - 1:-1]])
        executor = MigrationExecutor(connection)
        executor.migrate([before])
        reverted = executor.loader.project_state([before]).apps.get_model("catalog", "StackOption")
        assert reverted.objects.get(pk=hf.pk).model_families == built
        assert reverted.objects.get(pk=narrowed.pk).model_families == ["llama"]
        if cleared_everywhere:
            assert reverted.objects.get(pk=other.pk).model_families == ["bert"]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
