"""4-bit base weights under LoRA adapters (`grpo.quantization: 4bit`), as paper 1's released code trained
(bitsandbytes NF4 through Unsloth): the frozen base loads quantized and computes in the run's precision
(hardex.precision); the adapters train in float32 (TRL casts them to bfloat16, hardex casts them back:
hardex.training's Trainer).

It needs a CUDA GPU and the bitsandbytes package; anywhere else it is refused before the model loads,
with what to change. Probing and evaluation load the base at `models.<name>.dtype` as before.
"""

from __future__ import annotations

import importlib.util

QUANTIZATIONS = ("none", "4bit")


class QuantizationError(RuntimeError):
    """4-bit weights asked for where they cannot run; str() says why and what to change."""


def quantization_config(kind: str, use_cpu: bool, compute_dtype):
    """transformers' BitsAndBytesConfig for `kind` (None for none): NF4 with double quantization, computing in
    `compute_dtype` (the torch dtype of the run's precision, hardex.precision). Raises
    QuantizationError on a CPU or without bitsandbytes."""
    if kind == "none":
        return None
    if kind not in QUANTIZATIONS:
        raise ValueError(f"grpo.quantization {kind!r}: expected one of {', '.join(QUANTIZATIONS)}")
    if use_cpu:
        raise QuantizationError("grpo.quantization: 4bit needs a CUDA GPU (bitsandbytes' 4-bit kernels); "
                                "on a CPU set it to none")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise QuantizationError("grpo.quantization: 4bit needs the bitsandbytes package (pip install bitsandbytes)")
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute_dtype)
