import json
import re
from pathlib import Path

import pytest

from portal.catalog.models import GPUModel, NetworkOption, NvmeOption, ServerSKU
from portal.catalog.services import catalog_seed
from tests.conftest import REPO_ROOT, missing_service

REFERENCE = REPO_ROOT.parent / "shared" / "reference" / "gpu_specs.json"
_SLUG_OF = {  # reference name -> our slug
    "NVIDIA A100 40GB SXM4": "a100-sxm-40gb", "NVIDIA A100 40GB PCIe": "a100-pcie-40gb",
    "NVIDIA A100 80GB SXM4": "a100-sxm-80gb", "NVIDIA A100 80GB PCIe": "a100-pcie-80gb",
    "NVIDIA H100 SXM5 80GB": "h100-sxm-80gb", "NVIDIA H100 PCIe 80GB": "h100-pcie-80gb",
    "NVIDIA H100 NVL 94GB": "h100-nvl-94gb", "NVIDIA H200 SXM 141GB": "h200-sxm-141gb",
    "NVIDIA H200 NVL 141GB": "h200-nvl-141gb", "NVIDIA B200 (HGX, 1000W)": "b200-sxm-180gb",
    "NVIDIA L40S": "l40s-48gb", "NVIDIA RTX 6000 Ada Generation": "rtx-6000-ada-48gb",
    "NVIDIA GeForce RTX 4090": "rtx-4090-24gb", "NVIDIA L4": "l4-24gb",
}


def _first_number(value):
    if value is None or isinstance(value, int | float):
        return value
    return float(re.search(r"[\d.]+", str(value)).group())


@pytest.fixture(scope="module")
def reference():
    if not Path(REFERENCE).exists():
        missing_service(f"the reference specs are not at {REFERENCE}")
    return json.loads(Path(REFERENCE).read_text())["gpus"]


def test_seeded_gpus_match_the_datasheet_reference(db, reference):
    catalog_seed()
    assert GPUModel.objects.count() == len(reference)
    for spec in reference:
        gpu = GPUModel.objects.get(slug=_SLUG_OF[spec["name"]])
        assert float(gpu.memory_gb) == spec["memory_GB"], gpu.slug
        assert gpu.memory_bandwidth_gbps == spec["mem_bandwidth_GBps"], gpu.slug
        assert float(gpu.bf16_tflops) == pytest.approx(
            _first_number(spec["bf16_fp16_tensor_TFLOPS_dense"])), gpu.slug
        assert float(gpu.fp32_tflops) == pytest.approx(_first_number(spec["fp32_TFLOPS"])), gpu.slug
        fp8 = _first_number(spec["fp8_tensor_TFLOPS_dense"])
        assert (None if gpu.fp8_tflops is None else float(gpu.fp8_tflops)) == fp8, gpu.slug
        assert gpu.nvlink_gbps == _first_number(spec["nvlink_GBps_per_gpu"]), gpu.slug
        assert str(gpu.pcie_gen) in spec["pcie"] or "unverified" in spec["pcie"], gpu.slug


def test_seed_is_idempotent(db):
    first = catalog_seed()
    ServerSKU.objects.filter(slug="8x-h100-sxm-80gb").update(price_hourly="1.00")
    second = catalog_seed()
    assert first == second
    assert ServerSKU.objects.count() == first["skus"]
    assert str(ServerSKU.objects.get(slug="8x-h100-sxm-80gb").price_hourly) == "23.60"


def test_catalog_offers_what_the_product_needs(db):
    catalog_seed()
    assert set(ServerSKU.objects.values_list("gpu_count", flat=True)) == {1, 2, 4, 8}
    assert set(ServerSKU.objects.values_list("interconnect", flat=True)) == {
        "pcie", "nvlink-bridge", "nvswitch"}
    sizes = set(NvmeOption.objects.values_list("size_tb", flat=True))
    assert min(sizes) == 1 and max(sizes) == 10
    assert set(NvmeOption.objects.values_list("raid", flat=True)) == {"single", "raid0", "raid10"}
    assert NetworkOption.objects.get(is_default=True).speed_gbps == 1
    assert all(n.on_request for n in NetworkOption.objects.filter(kind="infiniband"))
    for sku in ServerSKU.objects.all():
        assert sku.price_monthly > sku.price_hourly * 500, sku.slug  # a month is ~730 h
