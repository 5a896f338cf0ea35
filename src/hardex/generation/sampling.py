"""Decoding settings shared by every backend and every stage that samples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# rows hardex's sampler (generation.token_sampler.sample_tokens) takes at a time: its float32 copies of the
# vocabulary stay small (256 rows of a 49k-word vocabulary: 50 MB each) however many rows a batch decodes
SAMPLE_ROWS = 256


@dataclass(frozen=True)
class Sampling:
    """Decoding settings. temperature 0 means greedy (then n must be 1)."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 256

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> "Sampling":
        return cls(float(cfg["temperature"]), float(cfg.get("top_p", 1.0)), int(cfg["max_new_tokens"]))
