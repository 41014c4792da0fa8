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
    # 0.2.2 is the last torchtitan release that reads a TOML job config (--job.config_file);
    # its float8 converter (fp8 plans) needs torchao.
    "torchtitan": (TORCH, NUMPY, "torchtitan==0.2.2", "torchao==0.18.0"),
}

# The packages the stacks' requirements pull in, pinned as the project's `ml` environment
# resolved them (pip install -c: a constraint installs nothing by itself, it only fixes the
# version of what is installed). torch's CUDA wheels pin their nvidia-* and triton dependencies
# exactly in their own metadata. Update together with the pins above.
CONSTRAINTS = (
    "absl-py==2.5.1", "annotated-types==0.8.0", "botocore==1.44.8", "certifi==2026.10.19.post1",
    "charset-normalizer==3.5.3", "datasets==5.2.0", "dill==0.4.1", "docstring-parser==0.18.0",
    "einops==0.8.2", "filelock==4.3.1", "fsspec==2026.9.0", "grpcio==1.85.3", "hf-xet==1.8.0",
    "hjson==3.1.0", "huggingface-hub==2.4.0", "idna==3.20", "jinja2==3.1.6", "jmespath==1.1.0",
    "markdown==3.11.3", "markupsafe==3.0.4", "mpmath==1.3.0", "msgpack==1.2.4",
    "multiprocess==0.70.19", "networkx==3.6.1", "ninja==1.13.2", "packaging==26.3",
    "pandas==3.1.1", "pillow==13.0.0", "protobuf==7.36.2", "psutil==7.2.2", "py-cpuinfo==9.0.0",
    "pyarrow==26.0.1", "pydantic==2.14.4", "pydantic-core==2.50.5", "python-dateutil==2.9.0.post0",
    "pyyaml==6.0.4", "regex==2026.11.19", "requests==2.34.2", "rich==15.0.0", "s3transfer==0.19.3",
    "safetensors==0.8.0", "six==1.17.0", "sympy==1.14.0", "tensorboard-data-server==0.7.2",
    "tokenizers==0.23.3", "torchdata==0.11.0", "tqdm==4.70.1", "typing-extensions==4.16.0",
    "tyro==1.0.17", "urllib3==2.8.0", "werkzeug==3.1.9", "xxhash==4.1.0",
)


def constraints_text() -> str:
    return ("# Versions of the packages the stack's requirements pull in (pip install -c).\n"
            + "\n".join(CONSTRAINTS) + "\n")

TRACKER_PACKAGES: dict[str, tuple[str, ...]] = {
    "tensorboard": ("tensorboard==2.21.0",),
    "mlflow": ("mlflow==3.18.0",),
    "wandb": ("wandb==0.31.0",),
}

# Trainyard's node tools (the sync and restore tools, at termination too) run from their own venv,
# /opt/trainyard/tools (stack/sh/node_tools.sh): boto3 and exactly what it needs (pip --no-deps),
# the versions the portal itself runs.
TOOLS_PACKAGES = ("boto3==1.44.8", "botocore==1.44.8", "s3transfer==0.19.3", "jmespath==1.1.0",
                  "python-dateutil==2.9.0.post0", "six==1.17.0", "urllib3==2.8.0")


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
