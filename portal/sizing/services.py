"""Glue between the web (wizard, API) and the pure estimator and recommender.

Models come from a preset, an uploaded config.json or a Hugging Face model id; workload and
goal are built from plain values; the catalog is read from the database.
"""

from __future__ import annotations

import json
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlencode, urlparse

from django.core import signing
from django.core.cache import cache
from django.urls import reverse

from portal.catalog.pricing import resold
from portal.catalog.selectors import price_basis
from portal.sizing.catalog_live import catalog_cached, price_list_for
from portal.sizing.config_json import load_config_json, shape_problem
from portal.sizing.estimator import (
    ESTIMATOR_VERSION,
    Estimate,
    ModelSpec,
    ParallelConfig,
    TrainingConfig,
    estimate,
    get_preset,
    list_presets,
    model_from_hf_config,
)
from portal.sizing.estimator.presets import preset_config
from portal.sizing.recommend import (
    Goal,
    Plan,
    Recommendation,
    SearchOptions,
    Workload,
    get_strategy,
    plan_estimate,
    recommend,
)
from portal.sizing.recommend.search import make_gpu, make_link
from portal.sizing.recommend.stacks import Needs, choose_stack

MAX_CONFIG_BYTES = 256 * 1024
HF_TIMEOUT_S = 5.0
# The Hub's rule for repo ids: two parts of up to 96 characters, no '--' or '..' (checked apart)
HF_REPO_ID = re.compile(r"[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9_])?/[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9_])?",
                        re.ASCII)
HF_CACHE_S = 24 * 3600
CONFIG_SALT = "trainyard.sizing.config"


class ModelSourceError(ValueError):
    """A model could not be loaded; the message says what to do instead."""


@dataclass(frozen=True)
class LoadedModel:
    spec: ModelSpec
    label: str
    config: dict | None = None  # the config.json it came from (uploads, Hugging Face)


# --- Models -------------------------------------------------------------------------------
def preset_names() -> list[str]:
    return list_presets()


def model_from_preset(name: str) -> LoadedModel:
    name = (name or "").strip()
    if name not in list_presets():
        raise ModelSourceError(f"Unknown model {name!r}. Pick one of the presets, e.g. llama-3.1-8b, "
                               "or upload its config.json.")
    return LoadedModel(spec=get_preset(name), label=name)


def model_from_config_text(text: bytes | str, *, name: str = "") -> LoadedModel:
    """A model from the text of a Hugging Face config.json (uploaded or carried in a form)."""
    if isinstance(text, bytes):
        if len(text) > MAX_CONFIG_BYTES:
            raise ModelSourceError("That file is too large for a config.json (over 256 KB).")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ModelSourceError("That file is not text; upload the model's config.json.") from None
    if len(text) > MAX_CONFIG_BYTES:
        raise ModelSourceError("That config.json is too large (over 256 KB).")
    try:
        config = load_config_json(text)
    except ValueError as exc:
        raise ModelSourceError(str(exc)) from None
    if not isinstance(config.get("model_type"), str) or not config["model_type"].strip():
        raise ModelSourceError(
            "This config.json does not say which architecture it is: it has no \"model_type\" "
            "(e.g. \"llama\", \"mistral\", \"qwen2\", \"qwen3\", \"gemma\", \"gpt2\" or \"bert\"). "
            "Upload the config.json from the model's Hugging Face page, or pick a preset.")
    try:
        spec = model_from_hf_config(config, name=name)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise ModelSourceError(f"Cannot read this config.json: {str(exc).rstrip('.')}.") from None
    if problem := shape_problem(spec):
        raise ModelSourceError(f"Cannot size this config.json: {problem}.")
    return LoadedModel(spec=spec, label=name or spec.name, config=config)


def model_from_upload(upload, *, name: str = "") -> LoadedModel:
    """A model from an uploaded config.json: its size is checked before a byte is read."""
    if upload.size is None or upload.size > MAX_CONFIG_BYTES:
        raise ModelSourceError(f"That file is too large for a config.json ({upload.size or 0:,} bytes; "
                               f"at most {MAX_CONFIG_BYTES // 1024} KB).")
    return model_from_config_text(upload.read(MAX_CONFIG_BYTES + 1), name=name)


def config_token(loaded: LoadedModel) -> str:
    """An uploaded config.json, carried between wizard steps in a hidden field."""
    return signing.dumps({"name": loaded.label, "config": loaded.config}, salt=CONFIG_SALT, compress=True)


def model_from_config_token(token: str) -> LoadedModel:
    try:
        data = signing.loads(token, salt=CONFIG_SALT)
    except signing.BadSignature:
        raise ModelSourceError("The uploaded config.json was lost on the way; upload it again.") from None
    return model_from_config_text(json.dumps(data["config"]), name=data["name"])


def preset_for_hf_id(repo_id: str) -> str | None:
    """The preset whose config.json came from Hugging Face model ``repo_id`` (ids compare
    without case, as the Hub's do), or None."""
    wanted = repo_id.strip().lower()
    return next((name for name in list_presets()
                 if (getattr(get_preset(name), "source", "") or "").lower() == wanted), None)


def model_from_hf(repo_id: str) -> LoadedModel:
    """Fetch config.json from the Hugging Face Hub (cached); a clear message when offline."""
    repo_id = (repo_id or "").strip()
    if not HF_REPO_ID.fullmatch(repo_id) or "--" in repo_id or ".." in repo_id:
        shown = repo_id if len(repo_id) <= 60 else repo_id[:57] + "…"
        raise ModelSourceError(f"{shown!r} is not a Hugging Face model id. An id looks like "
                               "organisation/name, in letters, digits, '-', '_' and '.', "
                               "e.g. mistralai/Mistral-7B-v0.1.")
    preset = preset_for_hf_id(repo_id)
    if preset is not None:  # a model we ship: no download, so it works offline (and when gated)
        return LoadedModel(spec=get_preset(preset), label=repo_id, config=preset_config(preset))
    key = f"sizing:hf-config:{repo_id}"
    text = cache.get(key)
    if text is None:
        text = _hf_download(repo_id)
        cache.set(key, text, HF_CACHE_S)
    return model_from_config_text(text, name=repo_id)


def _hf_download(repo_id: str) -> str:
    # Imported here, not at the top: huggingface_hub is heavy (and only needed for Hub ids),
    # so the web process does not load it until someone sizes a Hub model.
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
    )

    offline = ModelSourceError(
        "Hugging Face cannot be reached from this server (it is offline). "
        "Upload the model's config.json instead, or pick a preset.")
    try:  # the local cache first: no network needed for a model fetched before
        path = hf_hub_download(repo_id, "config.json", local_files_only=True)
    except Exception:  # noqa: BLE001 - not cached, or any cache problem: go online
        path = None
    if path is None:
        if constants.HF_HUB_OFFLINE or not _reachable(constants.ENDPOINT):
            raise offline
        try:
            path = hf_hub_download(repo_id, "config.json", etag_timeout=HF_TIMEOUT_S)
        except GatedRepoError:
            raise ModelSourceError(
                f"{repo_id} is gated on Hugging Face; upload its config.json instead.") from None
        except RepositoryNotFoundError:
            raise ModelSourceError(f"Hugging Face has no model {repo_id!r}; check the spelling.") from None
        except EntryNotFoundError:
            raise ModelSourceError(f"{repo_id} has no config.json; upload one instead.") from None
        except (HfHubHTTPError, OSError):
            raise offline from None
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _reachable(endpoint: str) -> bool:
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=HF_TIMEOUT_S / 2):
            return True
    except OSError:
        return False


# --- Recommendation -----------------------------------------------------------------------
def catalog(*, organisation=None, stock: bool = True, viewer=None):
    """The catalog (kept per process until it changes), with stock read now, and priced as
    ``organisation`` pays (its or its reseller's price list); read by ``viewer``, a reseller's
    customer's own people and keys see each unit at the reseller's selling price
    (``portal.catalog.selectors.price_basis``), as its catalog shows it."""
    price_list = price_list_for(organisation)
    if viewer is not None:
        price_list = resold(price_list, price_basis(viewer, organisation))
    return catalog_cached(stock=stock, price_list=price_list)


def strategy_runs(strategy: str, *, tp: int = 1, pp: int = 1) -> bool:
    """Whether a stack of the catalog runs the strategy with this tensor and pipeline size."""
    s = get_strategy(strategy)
    needs = Needs.of(sharding=s.sharding, offload=s.offload, tp=tp, pp=pp)
    return choose_stack(needs, catalog(stock=False).stack) is not None


def recommendation_run(*, workload: Workload, goal: Goal, options: SearchOptions | None = None,
                       catalog_data=None) -> Recommendation:
    """Raises ValueError (with a message for the user) when nothing fits or inputs clash."""
    return recommend(workload, goal, catalog_data or catalog(), options)


def strategy_label(name: str) -> str:
    try:
        return get_strategy(name).label
    except ValueError:
        return name


INTERCONNECT_LABELS = {"pcie": "PCIe", "nvlink-bridge": "NVLink bridge", "nvswitch": "NVLink / NVSwitch"}
RAID_LABELS = {"single": "single drive", "raid0": "RAID 0 (striped)", "raid10": "RAID 10 (striped mirrors)"}


def plan_payload(plan: Plan | dict, *, workload: dict | None = None, catalog_data=None) -> dict:
    """The plan as stored with a quote: the recommender's JSON plus labels and the workload."""
    out = dict(plan if isinstance(plan, dict) else plan.to_dict())
    out["strategy_label"] = strategy_label(out.get("strategy", ""))
    out["interconnect_label"] = INTERCONNECT_LABELS.get(out.get("interconnect"), out.get("interconnect", ""))
    out["raid_label"] = RAID_LABELS.get(out.get("raid"), out.get("raid", ""))
    if catalog_data is not None:
        names = {o.slug: o.name for o in (*catalog_data.networks, *catalog_data.storage)}
        out["network_name"] = names.get(out.get("network"), out.get("network", ""))
        out["storage_provider_name"] = names.get(out.get("storage_provider"), "")
    if workload:
        out["workload"] = workload
    return out


# --- Estimate (API) -----------------------------------------------------------------------
def estimate_run(*, model: ModelSpec, training: dict, parallel: dict, gpu_slug: str | None = None,
                 sku_slug: str | None = None, network_slug: str | None = None,
                 train_tokens: float | None = None) -> Estimate:
    """One estimator call. A catalog GPU makes it timed; a SKU also sets the links, like the
    recommender does (NVLink or PCIe inside a node, the network option between nodes)."""
    gpu, link = None, None
    if sku_slug or gpu_slug:
        data = catalog(stock=False)
        sku = data.sku(sku_slug) if sku_slug else None
        spec = data.gpu(sku.gpu_slug if sku else gpu_slug)
        gpu = make_gpu(spec)
        if sku:
            parallel_config = ParallelConfig(**parallel)
            nodes = max(1, -(-parallel_config.world_size // sku.gpus_per_node))
            network = data.network(network_slug) if network_slug else None
            link = make_link(sku, spec, nodes, network)
    return estimate(model, TrainingConfig(**training), ParallelConfig(**parallel), gpu=gpu,
                    interconnect=link, train_tokens=train_tokens)


def stored_plan_estimate_json(data: dict) -> dict:
    """``estimate_stored_plan`` as the API answers it: the estimate's JSON, plus the estimator
    version that sized the plan, today's, and whether the plan was sized by an older model (its
    bytes and times may then differ from the re-estimate's)."""
    plan = Plan.from_dict(data)
    return estimate_stored_plan(data).to_dict() | {
        "plan_estimator_version": plan.estimator_version, "estimator_version": ESTIMATOR_VERSION,
        "from_older_model": plan.from_older_model}


def estimate_stored_plan(data: dict) -> Estimate:
    """Re-estimate a plan as stored with a quote or order (``Plan.to_dict()`` JSON): the same
    per-GPU bytes as when it was recommended (by today's estimator model; a plan sized by an
    older one says so: ``Plan.from_older_model``), timed on its SKU and network when the catalog
    still has them. ValueError for a plan that cannot be read (see ``Plan.from_dict``)."""
    plan = Plan.from_dict(data)
    data_catalog = catalog(stock=False)
    try:
        sku = data_catalog.sku(plan.sku)
        spec = data_catalog.gpu(sku.gpu_slug)
        network = data_catalog.network(plan.network) if plan.network else None
    except ValueError:
        return plan_estimate(plan)  # the server size left the catalog: memory only
    return plan_estimate(plan, gpu=make_gpu(spec), interconnect=make_link(sku, spec, plan.nodes, network))


# --- Links -------------------------------------------------------------------------------
def wizard_url(workload: dict | None) -> str:
    """A link back to the wizard's results for the inputs stored with a plan (presets only)."""
    base = reverse("sizing:wizard")
    if not isinstance(workload, dict) or workload.get("model_source") != "preset":
        return base  # plans from the API carry what the reseller sent
    params = {"preset": workload.get("model")}
    for key in ("finetune", "lora_rank", "precision", "seq_len", "dataset_tokens", "dataset_files", "epochs",
                "goal", "deadline_hours", "budget_usd"):
        if workload.get(key) not in (None, ""):
            params[key] = workload[key]
    if workload.get("train_tokens"):
        params["train_tokens"] = workload["train_tokens"]
    if workload.get("use_dora") is True:
        params["use_dora"] = "on"
    batch, seq_len = workload.get("global_batch_tokens"), workload.get("seq_len")
    if isinstance(batch, int) and isinstance(seq_len, int) and seq_len > 0:
        params["global_batch_seqs"] = batch // seq_len
    return f"{base}?{urlencode(params)}"
