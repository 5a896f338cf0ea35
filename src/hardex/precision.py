"""The floating-point precision a job computes in, resolved once for the machine it runs on.

`grpo.precision` (bf16, fp16, fp32 or auto) and `models.<name>.dtype: auto` are read here, and every place that
needs the answer takes it from `resolve_precision`: the trainer's autocast and the policy's load dtype
(hardex.training), the NF4 compute dtype (hardex.quantization), accelerate's `--mixed_precision`
(hardex.launch), the vLLM server's `--dtype` (hardex.vllm_server) and the transformers generator's dtype
(hardex.generation.hf.pick_dtype).

bfloat16 needs a GPU of compute capability 8.0 or above (Ampere on): older cards emulate it (slowly) and vLLM
refuses it. There `auto` takes fp32, not fp16: the models hardex trains were pretrained in bfloat16, whose
activations can exceed float16's range (65504), and fp32 computes what a CPU run of the same design computes;
fp16 stays available by name, for speed. `grpo.precision: bf16` on such a card is refused: at planning where
the config states the card's capability (compute.gpu_rates.compute_capability; hardex.config_gpu), else in the
job. On a CPU, `auto` takes bf16 where the CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX), fp32
elsewhere.

The card is read without starting CUDA (nvidia-smi) unless this process has started it already: a probe or
evaluation process must not start CUDA before its vLLM engine starts its workers.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

#: the lowest compute capability with bfloat16 in hardware
BF16_CAPABILITY = (8, 0)
#: each precision's dtype, as torch, transformers and vLLM name it
DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}

log = logging.getLogger(__name__)


class PrecisionError(RuntimeError):
    """A precision this machine cannot compute in; str() says what to set instead."""


def cpu_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX, read from /proc/cpuinfo): there
    torch's bfloat16 matmul ran about 4x float32's (docs/performance.md); elsewhere it is emulated, slower.
    HARDEX_CPU_BFLOAT16=0 or 1 overrides the answer (a test, a CPU the flags misreport)."""
    forced = os.environ.get("HARDEX_CPU_BFLOAT16")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: no way to tell, take the safe float32
        return False
    return re.search(r"\b(avx512_bf16|amx_bf16)\b", flags) is not None


def gpu_capability() -> tuple[int, int] | None:
    """The lowest compute capability among the GPUs this process may use, or None when it cannot tell (no
    GPU, no nvidia-smi). From torch when this process has started CUDA, else from nvidia-smi, restricted to
    CUDA_VISIBLE_DEVICES where its ids name the listed GPUs (the lowest of the node's otherwise)."""
    torch = sys.modules.get("torch")  # never import torch, let alone start CUDA, just to ask
    if torch is not None and torch.cuda.is_initialized():
        return min((torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())), default=None)
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    gpus = []
    for line in out.splitlines():
        index, uuid, cap = ([p.strip() for p in line.split(",")] + ["", "", ""])[:3]
        if re.fullmatch(r"\d+\.\d+", cap):  # "[N/A]" from a driver too old to say
            gpus.append((index, uuid, tuple(int(x) for x in cap.split("."))))
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    mine = [cap for index, uuid, cap in gpus if any(v == index or (len(v) > 4 and uuid.startswith(v)) for v in visible)]
    return min(mine or [cap for *_, cap in gpus], default=None)


def gpu_bfloat16() -> bool:
    """Whether this process's GPUs compute bfloat16 in hardware; a card that cannot be read is taken to (every
    data-centre card since 2020 does; vLLM would refuse bfloat16 loudly on an older one)."""
    cap = gpu_capability()
    return cap is None or cap >= BF16_CAPABILITY


def bf16_refusal(key: str, value: str, card: str, instead: str = "auto, fp32 or fp16") -> str:
    """The line refusing bfloat16 (`key`: `value`) on a card without it; `card` says whose capability is which,
    e.g. "this one's is 7.0". Planning (hardex.config_gpu, from the card the config states) and the job say it alike."""
    return (f"{key}: {value} needs a GPU of compute capability 8.0 or above (bfloat16 in hardware); {card}: set it "
            f"to {instead}")


def resolve_precision(requested: str, use_cpu: bool) -> str:
    """bf16, fp16 or fp32 for `requested` (one of those, or auto) on this machine, its CPU or its GPUs (see the
    module's docstring). Raises PrecisionError for bf16 on a GPU without it."""
    if requested not in ("auto", *DTYPE_NAMES):
        raise ValueError(f"precision {requested!r}: expected auto, bf16, fp16 or fp32")
    if use_cpu:
        if requested == "auto":
            return "bf16" if cpu_bfloat16() else "fp32"
        return requested
    if requested in ("auto", "bf16") and not gpu_bfloat16():
        cap = ".".join(map(str, gpu_capability()))
        if requested == "bf16":
            raise PrecisionError(bf16_refusal("grpo.precision", "bf16", f"this one's is {cap}"))
        log.warning("precision auto: fp32, as the GPU's compute capability %s has no bfloat16 (8.0 or above); fp16 is "
                    "faster but may overflow a model pretrained in bfloat16", cap)
        return "fp32"
    return "bf16" if requested == "auto" else requested


def torch_dtype(precision: str):
    """The torch dtype of a resolved precision (bf16, fp16 or fp32)."""
    import torch

    return getattr(torch, DTYPE_NAMES[precision])


def training_precision(grpo: dict[str, Any], use_cpu: bool) -> str:
    """grpo.precision resolved for this machine (resolve_precision): `auto` is bf16 on a GPU of
    compute capability 8.0 or above and on a CPU with hardware bfloat16, fp32 elsewhere; bf16 on an older GPU
    is refused (PrecisionError)."""
    return resolve_precision(grpo["precision"], use_cpu)


def policy_dtype(grpo: dict[str, Any], use_cpu: bool):
    """The dtype the policy's weights load in. The weights the optimizer updates (full fine-tuning) are float32
    under any precision, on a CPU as on a GPU: torch's AdamW keeps no float32 copy of a 16-bit weight, and
    its small steps would vanish in bfloat16's 8 bits (or overflow fp16's loss scaling); autocast computes
    in 16 bits all the same. LoRA's frozen base loads in the precision's dtype (bfloat16, float16 or float32);
    its adapters are float32 (PEFT's default, restored after TRL's cast for a quantized base: _trainer_class)."""
    import torch

    if grpo["finetune"] == "full":
        return torch.float32
    return torch_dtype(training_precision(grpo, use_cpu))
