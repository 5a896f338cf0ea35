"""Stand-in models: a tiny randomly initialised model of a real model's architecture, for rehearsals.

The stand-in is built from the real model's own config.json (kept in hardex.architectures) with small
sizes, so the code paths its architecture takes are the ones a rehearsal runs: Phi-3's fused qkv_proj
and gate_up_proj (which LoRA targets by those names), Qwen3's q/k norms, Llama 3.1's rope scaling,
Qwen2's layout. Its tokenizer is byte-level BPE with the real family's special tokens and chat
template (TRL's copy of it where TRL ships one), so Qwen3's non-thinking mode and Llama's BOS are
rendered as they will be on the GPU.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from hardex.architectures import config_of, standin_spec
from hardex.models import build_tokenizer

#: the stand-in's sizes: small enough for a CPU job of seconds, GQA kept where the real model has it
SIZES = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "head_dim": 16, "max_position_embeddings": 4096}
SOURCE_FILE = "standin.json"  # beside the weights: what it stands in for (skipped by the fingerprint)


def special_tokens(template: str, spec: dict[str, Any]) -> list[str]:
    """The template's special tokens (<|im_start|>, <|eot_id|>, <think> ...) and the spec's bos/eos/pad."""
    found = re.findall(r"<\|[A-Za-z0-9_]+\|>|</?think>", template)
    named = [spec.get(k) for k in ("bos", "eos", "pad")]
    return list(dict.fromkeys([t for t in named if t] + found))


def standin_tokenizer(template: str, spec: dict[str, Any]):
    """A byte-level BPE tokenizer (every text encodes) carrying the family's special tokens and template."""
    # a few merges of ordinary words keep prompts short; what they are does not matter to a random model
    texts = [template, "the of and to in is that at the start of swap answer number"]
    return build_tokenizer(texts, 512, special_tokens(template, spec), eos=spec["eos"],
                           pad=spec.get("pad") or spec["eos"], bos=spec.get("bos"), chat_template=template)


def standin_config(real: dict[str, Any], tokenizer) -> Any:
    """The real config with the stand-in's sizes and the stand-in tokenizer's vocabulary and token ids."""
    from transformers import AutoConfig

    cfg = {k: v for k, v in real.items() if k not in ("_name_or_path", "transformers_version", "auto_map")}
    heads, kv = real["num_attention_heads"], real.get("num_key_value_heads") or real["num_attention_heads"]
    small_heads = SIZES["num_attention_heads"]
    cfg.update(SIZES, num_key_value_heads=max(1, small_heads * kv // heads), vocab_size=len(tokenizer),
               bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
               pad_token_id=tokenizer.pad_token_id)
    if cfg.get("max_window_layers") is not None:  # Qwen2: the layers past which a sliding window would apply
        cfg["max_window_layers"] = SIZES["num_hidden_layers"]
    if "layer_types" in cfg:  # per-layer attention kinds (Qwen2/Qwen3 in newer configs): one per stand-in layer
        cfg["layer_types"] = cfg["layer_types"][: SIZES["num_hidden_layers"]]
    return AutoConfig.for_model(**cfg)


def build_standin(out_dir: str | Path, architecture: str, seed: int = 0, log=print) -> dict[str, Any]:
    """Build and save the stand-in of `architecture` (a kept hub id); returns what standin.json records."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    t0 = time.time()
    real, spec = config_of(architecture), standin_spec(architecture)
    tokenizer = standin_tokenizer(spec["chat_template"], spec)
    torch.manual_seed(seed)
    config = standin_config(real, tokenizer)
    model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id, do_sample=True)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    record = {"stands_in_for": architecture, "architecture": real["architectures"][0],
              "parameters": sum(p.numel() for p in model.parameters()), "vocab_size": len(tokenizer),
              "special_tokens": special_tokens(spec["chat_template"], spec), "seed": seed,
              "seconds": round(time.time() - t0, 1)}
    (out / SOURCE_FILE).write_text(json.dumps(record, indent=1))
    log(f"stand-in for {architecture}: {record['architecture']}, {record['parameters']:,} parameters, "
        f"vocab {record['vocab_size']}, template tokens {', '.join(record['special_tokens'])}")
    return record
