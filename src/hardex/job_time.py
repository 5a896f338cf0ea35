"""How long each GPU job runs: the runtime (Slurm's -t) a probe, train or evaluate job asks for, estimated
from its work (steps x completions x tokens; prompts x samples x tokens) at stated GPU rates rather than from
the model's size alone, so that a long run of a large model is not killed at its first attempt's limit.

The rates are a GPU's; on a CPU, and where the work cannot be known while Snakemake plans (an architecture
that is not kept, a hub split not downloaded yet), a job asks compute.runtime_min + runtime_min_per_b x size_b
minutes as before. Snakemake sizes a job's resources again when it submits it, once its inputs exist, so the
row counts read from their files (split_rows) are the real ones by then.
"""

from __future__ import annotations

import math
from pathlib import Path

from hardex.architectures import count_parameters
from hardex.config import generation_settings, grpo_settings, known_split_size, probe_settings, run_grpo_settings
from hardex.model_shape import (DTYPE_BYTES, ROLLOUT_MAX_BATCH_PROMPTS, ROLLOUT_TOKEN_BUDGET, Shape, hf_batch,
                                model_architecture, sampling_bytes_per_row)
from hardex.schedule import run_steps

#: sustained FLOP/s of one GPU in a train step's forward and backward passes and in a generation's prefill:
#: 30 % of an H100 SXM's dense bfloat16 peak (989 TFLOP/s), a model FLOPs utilisation Hugging Face training
#: with gradient checkpointing reaches at these lengths. Stated, not measured: no GPU step of a model above
#: 135M parameters has run here yet (docs/gpu-runs.md); a measured rate should replace it
GPU_FLOPS = 3.0e14
#: bytes per second a decode step streams from GPU memory (every weight, the batch's KV cache, the sampler's
#: float32 copies of each row's logits): 45 % of an H100 SXM's 3.35 TB/s. Decoding a batch of a model of
#: billions of parameters is bound by this; a small model's by per-step overheads (below), which is why
#: docs/gpu-runs.md's 0.6B Qwen3 (9-24k tokens/s) gives no rate for the presets' models
GPU_DECODE_BYTES_PER_S = 1.5e12
#: what a decode step costs beside its memory traffic: about 30 kernel launches per layer at ~10 us each
DECODE_SECONDS_PER_LAYER = 3e-4
#: Slurm's runtime is compute.runtime_min (start, model loading) + the estimate times this (rates that vary,
#: prompts longer than planned), times the attempt
RUNTIME_SAFETY = 1.5


def generation_seconds(s: Shape, n_params: int, nbytes: int, *, prompts: int, samples: int, prompt_tokens: int,
                       max_new_tokens: int, budget: int, max_batch_prompts: int, top_p: float = 1.0) -> float:
    """GPU seconds to sample `samples` completions of `max_new_tokens` for each of `prompts` prompts in the
    batches HFGenerator packs: each batch's prefill (2 FLOPs per parameter and prompt token at GPU_FLOPS) and
    max_new_tokens decode steps, each streaming the weights, the batch's KV cache (half full on average) and
    its sampler's logits at GPU_DECODE_BYTES_PER_S, plus its per-layer overhead."""
    batch = hf_batch(budget, samples, prompt_tokens, max_new_tokens, max_batch_prompts, prompts)
    batches = math.ceil(prompts / batch.prompts)
    traffic = (n_params * nbytes + batch.rows * (prompt_tokens + max_new_tokens / 2) * s.kv_bytes_per_token(nbytes)
               + batch.rows * sampling_bytes_per_row(s, nbytes, top_p))
    decode = batches * max_new_tokens * (traffic / GPU_DECODE_BYTES_PER_S + s.layers * DECODE_SECONDS_PER_LAYER)
    return decode + 2 * n_params * prompts * prompt_tokens / GPU_FLOPS


def _sized(cfg: dict, model: str) -> tuple[Shape, int] | None:
    """The model's shape and parameters on GPUs (the rates are a GPU's); None on a CPU, or where its
    architecture is unknown or unreadable (a local config.json the first job will refuse)."""
    if not _on_gpus(cfg):
        return None
    arch, _ = model_architecture(cfg["models"][model])
    try:
        return (Shape.of(arch), count_parameters(arch)) if arch is not None else None
    except (KeyError, TypeError, ValueError):
        return None


def train_seconds(cfg: dict, model: str, steps: int) -> float | None:
    """GPU seconds of a train job of `steps` steps (None: the model's architecture is unknown). A step: its
    rollouts (generation_seconds; TRL's generate prefills every completion) and the forward and backward
    passes of its completions x (prompt + completion) tokens, 2 FLOPs per parameter and token forward, 4
    backward with every weight trained (2 under LoRA: no weight gradients of the frozen base), 2 more to
    recompute under gradient checkpointing and 2 for the reference model's forward when beta > 0, at
    GPU_FLOPS; grpo.processes share the work."""
    sized = _sized(cfg, model)
    if sized is None:
        return None
    s, n = sized
    g = grpo_settings(cfg, model)
    prompt, completion = int(cfg["compute"].get("prompt_tokens") or 512), g["max_completion_length"]
    completions = g["prompts_per_step"] * g["num_generations"]
    flops = 2 + (4 if g["finetune"] == "full" else 2) + (2 if g["gradient_checkpointing"] else 0) \
        + (2 if g["beta"] > 0 else 0)
    backprop = completions * (prompt + completion) * flops * n / GPU_FLOPS
    nbytes = DTYPE_BYTES["bfloat16"]
    if g["rollouts"] == "trl":
        rollouts = generation_seconds(s, n, nbytes, prompts=completions, samples=1, prompt_tokens=prompt,
                                      max_new_tokens=completion, budget=completions * (prompt + completion),
                                      max_batch_prompts=completions, top_p=g["top_p"])
    else:  # hardex's generator (vLLM's engines and server are faster: an upper bound)
        rollouts = generation_seconds(s, n, nbytes, prompts=g["prompts_per_step"], samples=g["num_generations"],
                                      prompt_tokens=prompt, max_new_tokens=completion, budget=ROLLOUT_TOKEN_BUDGET,
                                      max_batch_prompts=ROLLOUT_MAX_BATCH_PROMPTS, top_p=g["top_p"])
    return steps * (backprop + rollouts) / g["processes"]


def sampling_seconds(cfg: dict, model: str, work: list[tuple[int, int, int, float]]) -> float | None:
    """GPU seconds of a probe or evaluate job: `work` is (prompts, samples, max_new_tokens, top_p) per pass
    over a data split, generated in the model's token budget (None: the architecture or a split's size is
    unknown)."""
    sized = _sized(cfg, model)
    if sized is None or any(prompts is None for prompts, *_ in work):
        return None
    s, n = sized
    gen = generation_settings(cfg, model)
    budget = gen["token_budget"]
    prompt = int(cfg["compute"].get("prompt_tokens") or 512)
    return sum(generation_seconds(s, n, DTYPE_BYTES["bfloat16"], prompts=prompts, samples=samples, prompt_tokens=prompt,
                                  max_new_tokens=new, budget=budget, max_batch_prompts=gen["max_batch_prompts"],
                                  top_p=top_p)
               for prompts, samples, new, top_p in work if prompts)


def runtime_minutes(cfg: dict, model: str, seconds: float | None, attempt: int) -> int:
    """Slurm's runtime (-t, minutes) of a model job: on GPUs compute.runtime_min + RUNTIME_SAFETY x the
    estimated seconds; on a CPU, or where the work cannot be estimated, compute.runtime_min +
    compute.runtime_min_per_b x size_b. Times the attempt: a retry asks for more."""
    c = cfg["compute"]
    if seconds is None or not c.get("gpu"):  # the rates are a GPU's
        return int((c["runtime_min"] + c["runtime_min_per_b"] * cfg["models"][model]["size_b"]) * attempt)
    return int(math.ceil(c["runtime_min"] + RUNTIME_SAFETY * seconds / 60) * attempt)


# ---- a job's runtime from its inputs, for the rules' `runtime` resource -----------------------------------------

def file_rows(path: str | Path | None) -> int | None:
    """Rows of a parquet file, or None while it does not exist."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(str(path)).metadata.num_rows
    except (OSError, ValueError, TypeError):
        return None


def split_rows(cfg: dict, ref: str, path: str | Path | None) -> int | None:
    """Rows of a data split: its file's where it exists, else what the config says, else None."""
    rows = file_rows(path)
    return rows if rows is not None else known_split_size(cfg, ref)


def run_steps_planned(cfg: dict, model: str, task: str, strategy: str, subset: str | Path | None,
                      pool: str | Path | None) -> int | None:
    """Optimizer steps of a run: max_steps, or its epochs over its subset (read from the subset's file, else
    selection.budget of the pool); None while neither size is known."""
    g = run_grpo_settings(cfg, model, strategy)
    if not g.get("epochs"):
        return g["max_steps"]
    rows = file_rows(subset)
    if rows is None:
        pool_rows = split_rows(cfg, cfg["tasks"][task]["pool"], pool)
        rows = pool_rows and math.ceil(cfg["selection"]["budget"] * pool_rows)
    return run_steps(g, rows) if rows else None


def _on_gpus(cfg: dict) -> bool:
    """Whether a job's work is estimated (the rates are a GPU's): elsewhere its runtime is the size formula,
    and no data file is read for it while Snakemake plans."""
    return bool(cfg["compute"].get("gpu"))


def train_minutes(cfg: dict, model: str, task: str, strategy: str, subset, pool, attempt: int) -> int:
    """Runtime of a train job: its steps' rollouts and backward passes (train_seconds)."""
    steps = run_steps_planned(cfg, model, task, strategy, subset, pool) if _on_gpus(cfg) else None
    return runtime_minutes(cfg, model, train_seconds(cfg, model, steps) if steps else None, attempt)


def evaluation_work(cfg: dict, benchmarks: list[dict], paths: list, passes: int) -> list[tuple]:
    """(prompts, samples, max_new_tokens, top_p) of each benchmark (a rule's benchmark params: ref and decoding)
    at its file `paths`, `passes` times (checkpoints, or seeds)."""
    work = []
    for b, path in zip(benchmarks, paths):
        d = b["decoding"]
        samples = d["n_samples"] + (1 if d.get("greedy") else 0)
        work.append((split_rows(cfg, b["ref"], path), samples, d["max_new_tokens"], d.get("top_p", 1.0)))
    return work * passes


def sampling_minutes(cfg: dict, model: str, work: list[tuple], attempt: int) -> int:
    """Runtime of a probe or evaluate job doing `work` (sampling_seconds)."""
    return runtime_minutes(cfg, model, sampling_seconds(cfg, model, work), attempt)


def probe_minutes(cfg: dict, model: str, task: str, pool, attempt: int) -> int:
    """Runtime of a probe job: k samples of every pool prompt (sampling_seconds)."""
    if not _on_gpus(cfg):
        return runtime_minutes(cfg, model, None, attempt)
    p = probe_settings(cfg, task)
    work = [(split_rows(cfg, cfg["tasks"][task]["pool"], pool), p["k"], p["max_new_tokens"], p.get("top_p", 1.0))]
    return sampling_minutes(cfg, model, work, attempt)


def evaluate_base_minutes(cfg: dict, model: str, benchmarks: list[dict], paths: list, seeds: int,
                          attempt: int) -> int:
    """Runtime of the base model's evaluation: every benchmark once per run seed."""
    if not _on_gpus(cfg):
        return runtime_minutes(cfg, model, None, attempt)
    return sampling_minutes(cfg, model, evaluation_work(cfg, benchmarks, paths, seeds), attempt)


def evaluate_run_minutes(cfg: dict, model: str, task: str, strategy: str, benchmarks: list[dict], paths: list,
                         pool, attempt: int) -> int:
    """Runtime of a run's evaluation: every benchmark at each saved checkpoint (every save_steps, and the last)."""
    steps = run_steps_planned(cfg, model, task, strategy, None, pool) if _on_gpus(cfg) else None
    if not steps:
        return runtime_minutes(cfg, model, None, attempt)
    checkpoints = math.ceil(steps / run_grpo_settings(cfg, model, strategy)["save_steps"]) + 1
    return sampling_minutes(cfg, model, evaluation_work(cfg, benchmarks, paths, checkpoints), attempt)
