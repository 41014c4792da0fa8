"""Model presets, loaded from presets.json (data, not code)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from .hf_config import model_from_hf_config
from .models import ModelSpec

PRESETS_PATH = Path(__file__).with_name("presets.json")


@lru_cache(maxsize=1)
def _raw() -> dict[str, dict[str, Any]]:
    return json.loads(PRESETS_PATH.read_text())["presets"]


def list_presets() -> list[str]:
    return sorted(_raw())


def preset_config(name: str) -> dict[str, Any]:
    """The Hugging Face config.json fields stored for a preset (a copy)."""
    return dict(_entry(name)["config"])


def _entry(name: str) -> dict[str, Any]:
    try:
        return _raw()[name]
    except KeyError:
        raise ValueError(
            f"unknown model preset {name!r}; choose one of: {', '.join(list_presets())}"
        ) from None


@lru_cache(maxsize=64)
def get_preset(name: str) -> ModelSpec:
    entry = _entry(name)
    spec = model_from_hf_config(entry["config"], name=name)
    object.__setattr__(spec, "source", entry["source"])
    return spec
