"""The sizes of a decoder that its memory and its run time depend on, read from its config.json (a kept hub
architecture, a local model, the block of a built one), and the batches hardex's transformers generator packs:
the arithmetic shared by the memory estimates (hardex.memory_estimate) and the job-time estimates (hardex.job_time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hardex.architectures import config_of
from hardex.generation.sampling import SAMPLE_ROWS

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}

#: padded tokens per rollout batch of the train job: hardex.rollouts.rollout_generator's default (train_grpo
#: passes no budget, so generation.token_budget does not reach it; a test checks the two agree)
ROLLOUT_TOKEN_BUDGET = 262144
#: prompts per batch of the rollout generator (HFGenerator's default; rollout_generator passes none)
ROLLOUT_MAX_BATCH_PROMPTS = 256


@dataclass(frozen=True)
class Shape:
    """The sizes of a decoder that memory depends on, from its config.json."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    model_type: str
    max_positions: int | None
    torch_dtype: str | None

    @classmethod
    def of(cls, arch: dict) -> Shape:
        a = {**arch, **(arch.get("text_config") or {})}  # a multimodal config keeps the decoder's sizes apart
        heads, hidden = int(a["num_attention_heads"]), int(a["hidden_size"])
        return cls(hidden=hidden, intermediate=int(a["intermediate_size"]), layers=int(a["num_hidden_layers"]),
                   heads=heads, kv_heads=int(a.get("num_key_value_heads") or heads),
                   head_dim=int(a.get("head_dim") or hidden // heads), vocab=int(a["vocab_size"]),
                   tied=bool(a.get("tie_word_embeddings", False)), model_type=str(a.get("model_type", "")),
                   max_positions=a.get("max_position_embeddings"), torch_dtype=a.get("torch_dtype") or a.get("dtype"))

    @property
    def q(self) -> int:  # width of the queries (and of attention's output)
        return self.heads * self.head_dim

    @property
    def kv(self) -> int:  # width of the keys, and of the values (grouped-query attention: narrower)
        return self.kv_heads * self.head_dim

    def kv_bytes_per_token(self, nbytes: int) -> int:
        """What one token of one row adds to a transformers KV cache (DynamicCache and hardex's preallocated
        one alike): 2 (its key and its value) x layers x kv_heads x head_dim (grouped-query attention caches
        the key/value heads only; decoding never repeats them to every head, transformers' SDPA packs the
        query instead) x bytes of the dtype the keys are computed in."""
        return 2 * self.layers * self.kv * nbytes


def build_architecture(build_arch: dict) -> dict:
    """The config.json hardex.models.build_model writes for a `path: build` model: a Qwen3 with as many
    key/value heads as heads, head_dim = hidden / heads, tied embeddings, float32."""
    heads = int(build_arch["num_heads"])
    return {"model_type": "qwen3", "hidden_size": int(build_arch["hidden_size"]),
            "intermediate_size": int(build_arch["intermediate_size"]),
            "num_hidden_layers": int(build_arch["num_layers"]), "num_attention_heads": heads,
            "num_key_value_heads": heads, "head_dim": int(build_arch["hidden_size"]) // heads,
            "vocab_size": int(build_arch["vocab_size"]), "tie_word_embeddings": True,
            "max_position_embeddings": int(build_arch.get("max_position_embeddings", 1024)), "torch_dtype": "float32"}


def model_architecture(entry: dict) -> tuple[dict | None, str]:
    """The architecture of a config model and where it came from: `architecture` (a kept hub id), the path
    as a kept hub id, a local directory's config.json, the build block of `path: build`; else None."""
    if entry.get("architecture"):
        arch = config_of(entry["architecture"])
        if arch is not None:
            return arch, f"{entry['architecture']} (kept config)"
    path = str(entry["path"])
    if path == "build" and entry.get("build"):
        return build_architecture(entry["build"].get("arch") or {}), "build.arch (a built Qwen3)"
    if path not in ("build", "gguf", "standin"):
        arch = config_of(path)
        if arch is not None:
            return arch, f"{path} (kept config)"
        config = Path(path).expanduser() / "config.json"
        if config.is_file():
            return json.loads(config.read_text()), f"{config}"
    return None, f"unknown: {entry.get('size_b')}B parameters (size_b); activations, KV cache and adapters not counted"


def sampling_bytes_per_row(s: Shape, nbytes: int, top_p: float) -> int:
    """What one row of a decode step's logits and hardex's sampler (generation.token_sampler.sample_tokens) read
    and write: the model's logits, the float32 probabilities and their cumulative sum; top_p < 1 adds the sorted
    copy, its int64 indices and the masked copy."""
    return s.vocab * (nbytes + _sampler_bytes_per_word(top_p))


def sampling_bytes(s: Shape, nbytes: int, rows: int, top_p: float) -> int:
    """Memory of a decode step's logits (every row's) and of the sampler, which takes SAMPLE_ROWS rows at a time."""
    return s.vocab * (rows * nbytes + min(rows, SAMPLE_ROWS) * _sampler_bytes_per_word(top_p))


def _sampler_bytes_per_word(top_p: float) -> int:
    return 4 + 4 + 4 + (4 + 8 + 4 if top_p < 1 else 0)


@dataclass
class Batch:
    """What a transformers generation batch holds (HFGenerator._batches / _generate_batch)."""

    prompts: int
    rows: int
    width: int
    budget: int  # the token budget it was packed under (after the generator's own cap)

    @property
    def kv_tokens(self) -> int:
        return self.rows * self.width

    def __str__(self) -> str:
        return f"{self.rows}x{self.width}"


def hf_batch(budget: int, samples: int, prompt_tokens: int, max_new_tokens: int, max_batch_prompts: int,
             prompts_available: int | None = None) -> Batch:
    """The largest batch HFGenerator packs: prompts of `prompt_tokens` (the plan's longest) until rows x
    (prompt + new tokens) would pass the budget, at most max_batch_prompts prompts; at least one."""
    width = prompt_tokens + max_new_tokens
    prompts = min(max_batch_prompts, max(1, budget // (samples * width)))
    if prompts_available is not None:
        prompts = min(prompts, prompts_available)
    return Batch(prompts=prompts, rows=prompts * samples, width=width, budget=budget)
