"""Model prices from litellm's own price map, read as a file.

litellm ships the map it prices calls with (`model_prices_and_context_window_backup.json`
inside the installed package). Reading that file directly gives the same prices without
importing litellm (2-4 s) and without the network (litellm would fetch a fresh copy).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PRICE_FILE = "model_prices_and_context_window_backup.json"
# litellm's provider prefixes that price models under another provider's entries.
_SAME_PRICES = {"ollama_chat": "ollama"}


@dataclass(frozen=True)
class Price:
    input_per_token: float
    output_per_token: float
    entry: str  # the price map's key the figures come from

    def cost(self, input_tokens: float, output_tokens: float) -> float:
        return input_tokens * self.input_per_token + output_tokens * self.output_per_token


def price_file() -> Path | None:
    """Where the installed litellm keeps its price map (found without importing litellm)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / PRICE_FILE
        if path.is_file():
            return path
    return None


@functools.cache
def price_map() -> dict[str, Any]:
    path = price_file()
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _candidates(model: str) -> list[tuple[str, str | None]]:
    """Keys to look the model up under, with the provider the entry must belong to."""
    keys: list[tuple[str, str | None]] = [(model, None)]
    if "/" in model:
        provider, rest = model.split("/", 1)
        provider = _SAME_PRICES.get(provider, provider)
        keys += [(f"{provider}/{rest}", None), (rest, provider)]
    return keys


def price_of(model: str | None) -> Price | None:
    """The model's price per token, or None when litellm's map has none ("unknown price")."""
    if not model:
        return None
    data = price_map()
    for key, provider in _candidates(model):
        entry = data.get(key)
        if not isinstance(entry, dict) or key == "sample_spec":
            continue
        if provider is not None and entry.get("litellm_provider") != provider:
            continue  # `groq/x` is not priced as another provider's `x`
        inp, outp = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
        if isinstance(inp, int | float) and isinstance(outp, int | float):
            return Price(float(inp), float(outp), key)
    return None
