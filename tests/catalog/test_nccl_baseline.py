"""ServerSKU.nccl_busbw_gbps: seeded by the documented rule; 1-GPU SKUs have no baseline."""

import importlib

from django.apps import apps

from portal.catalog.models import ServerSKU

migration = importlib.import_module("portal.catalog.migrations.0004_serversku_nccl_busbw_gbps")


def test_the_seed_sets_the_baselines(catalog):
    baselines = dict(ServerSKU.objects.values_list("slug", "nccl_busbw_gbps"))
    assert baselines["8x-h100-sxm-80gb"] == 315  # 70% of 900/2 GB/s NVLink one way
    assert baselines["4x-l40s-48gb"] == 22  # 70% of PCIe Gen4 x16, 32 GB/s one way
    assert baselines["1x-l4-24gb"] is None


def test_the_migration_fills_existing_rows_from_the_seed(catalog):
    ServerSKU.objects.update(nccl_busbw_gbps=None)
    migration.baselines_from_seed(apps, None)
    assert ServerSKU.objects.get(slug="8x-b200-sxm-180gb").nccl_busbw_gbps == 630
