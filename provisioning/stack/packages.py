"""The pinned pip requirements a node installs for its training stack and tracker.

A stack option's own ``packages`` (a JSON list on ``catalog.StackOption``) wins; until that field
exists, or where it is empty, this table holds. A CPU test host (driver option ``test_host``)
installs torch and numpy only (``TEST_HOST_PACKAGES``): the CPU build lies on the test machine's
disk, the GPU stacks' packages (DeepSpeed's ops, torchtitan's float8 kernels) have nothing to run on there.
"""

from __future__ import annotations

TORCH = "torch==2.13.0"
# torch's wheel does not require numpy, but torch.distributed.checkpoint and most data code do.
NUMPY = "numpy==2.4.6"
# What a CPU test host installs: the training runtime, none of the GPU stacks' packages.
TEST_HOST_PACKAGES = (TORCH, NUMPY)

FALLBACK_PACKAGES: dict[str, tuple[str, ...]] = {
    "ddp": (TORCH, NUMPY),
    "fsdp": (TORCH, NUMPY, "accelerate==1.15.0", "transformers==5.24.0"),
    "deepspeed": (TORCH, NUMPY, "deepspeed==0.19.8", "transformers==5.24.0"),
    # 0.2.2 is the last torchtitan release that reads a TOML job config (--job.config_file).
    "torchtitan": (TORCH, NUMPY, "torchtitan==0.2.2"),
}

TRACKER_PACKAGES: dict[str, tuple[str, ...]] = {
    "tensorboard": ("tensorboard==2.21.0",),
    "mlflow": ("mlflow==3.18.0",),
    "wandb": ("wandb==0.31.0",),
}

# The checkpoint sync timer runs the storage sync tool with the venv's Python.
SYNC_PACKAGES = ("boto3==1.44.8",)


def stack_packages(option, slug: str, *, test_host: bool = False) -> tuple[str, ...]:
    """The requirements for the stack ``slug`` (``option`` is its StackOption row, or None)."""
    declared = getattr(option, "packages", None) if option is not None else None
    packages = tuple(str(p) for p in declared) if declared else FALLBACK_PACKAGES[slug]
    if test_host:
        return TEST_HOST_PACKAGES
    if not any(p.split("==")[0].strip().lower() == "numpy" for p in packages):
        packages = (*packages, NUMPY)
    return packages


def tracker_packages(slug: str, *, test_host: bool = False) -> tuple[str, ...]:
    return () if test_host else TRACKER_PACKAGES.get(slug, ())
