"""The architectures of the real models the presets name, kept in the repository.

Each model's own config.json lies at <owner>/<name>/config.json; index.yaml says what a stand-in tokenizer needs
(chat template, special tokens). A rehearsal builds a tiny random model of the same architecture from them; a
planning-time memory estimate reads sizes and count_parameters() from them. Nothing here touches the network.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import yaml

KEPT = Path(__file__).resolve().parent


def known() -> list[str]:
    """The hub ids whose config.json is kept."""
    return sorted(str(p.parent.relative_to(KEPT)) for p in KEPT.glob("*/*/config.json"))


def config_of(hub_id: str) -> dict | None:
    """The kept config.json of hub_id, or None when it is not kept."""
    if hub_id not in known():
        return None
    return json.loads((KEPT / hub_id / "config.json").read_text())


@cache
def _index() -> dict:
    return yaml.safe_load((KEPT / "index.yaml").read_text())


def standin_spec(hub_id: str) -> dict:
    """hub_id's index.yaml entry (bos, eos, pad, tokens) with chat_template resolved to the template's text."""
    if hub_id not in _index():
        raise KeyError(f"no architecture kept for {hub_id!r}; kept: {', '.join(known())}")
    spec = dict(_index()[hub_id])
    source = spec["chat_template"]
    if source.startswith("trl:"):
        import trl  # only here: planning reads configs without it

        path = Path(trl.__file__).parent / "chat_templates" / f"{source[4:]}.jinja"
    else:
        path = KEPT / hub_id / source
    spec["chat_template"] = path.read_text()
    return spec


def count_parameters(config: dict) -> int:
    """The parameter count of a dense decoder of a config.json, by arithmetic: exact for llama, qwen2,
    qwen3 and phi3 (tested against the models), a llama-like count for another model type.

    Phi3's fused qkv_proj and gate_up_proj hold as many weights as the separate projections of the others.
    """
    config = {**config, **(config.get("text_config") or {})}  # a multimodal config keeps the decoder's apart
    kind = config.get("model_type", "")
    h, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or h // heads
    q, kv = heads * head_dim, (config.get("num_key_value_heads") or heads) * head_dim
    attention = h * (q + 2 * kv) + q * h  # q, k, v, o projections (grouped-query: k and v are narrower)
    if kind == "qwen2":
        attention += q + 2 * kv  # Qwen2 always biases q, k, v
    elif kind != "phi3" and config.get("attention_bias"):
        attention += q + 2 * kv + h
    if kind == "qwen3":
        attention += 2 * head_dim  # q_norm and k_norm, RMSNorms over each head
    mlp = 3 * h * inter + (2 * inter + h if kind == "llama" and config.get("mlp_bias") else 0)  # gate, up, down
    layer = attention + mlp + 2 * h  # two RMSNorms
    embeddings = vocab * h
    lm_head = 0 if config.get("tie_word_embeddings", False) else vocab * h
    return embeddings + config["num_hidden_layers"] * layer + h + lm_head  # + the final norm
