"""How long each GPU job runs: the runtime (Slurm's -t) a probe, train or evaluate job asks for, estimated
from its work (steps x completions x tokens; prompts x samples x tokens) at stated GPU rates rather than from
the model's size alone, so that a long run of a large model is not killed at its first attempt's limit.

The rates are those stated for the GPU kind the config names (compute.gpu_kind: GPU_RATES; compute.gpu_rates
for another card); on a CPU, and where the work cannot be known while Snakemake plans (an architecture that is
not kept, a hub split not downloaded yet), a job asks compute.runtime_min + runtime_min_per_b x size_b minutes
as before. Snakemake sizes a job's resources again when it submits it, once its inputs exist, so the row counts
read from their files (split_rows) are the real ones by then.

The same estimates, summed over a config's jobs, are the GPU-hours `snakemake -n` prints per model
(gpu_hours_lines); there a model whose runs already recorded train steps in the working directory trains at
the rate those steps measured (measured_train), and its line says so.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hardex import layout
from hardex.architectures import count_parameters
from hardex.model_shape import (
    DTYPE_BYTES,
    ROLLOUT_MAX_BATCH_PROMPTS,
    ROLLOUT_TOKEN_BUDGET,
    Shape,
    hf_batch,
    model_architecture,
    sampling_bytes_per_row,
)
from hardex.schedule import completions_per_step, run_steps
from hardex.settings import (
    generation_settings,
    grpo_settings,
    known_split_size,
    model_tasks,
    probe_settings,
    run_grpo_settings,
    run_strategies,
    seed_design,
    seed_list,
)
from hardex.time_limit import TimeLimit

#: the share of a GPU's dense bfloat16 peak that a train step's forward and backward passes and a generation's
#: prefill sustain: a model FLOPs utilisation Hugging Face training with gradient checkpointing reaches at these
#: lengths. Stated, not measured: no GPU step of a model above 135M parameters had run when it was set
#: (docs/gpu-runs.md; a first step of the random Qwen3-4B on an H200 later took 1.7x the estimate)
FLOPS_UTILISATION = 0.30
#: the share of a GPU's memory bandwidth a decode step streams (every weight, the batch's KV cache, the
#: sampler's float32 copies of each row's logits). Decoding a batch of a model of billions of parameters is
#: bound by this; a small model's by per-step overheads (below), which is why docs/gpu-runs.md's 0.6B Qwen3
#: (9-24k tokens/s) gives no rate for the presets' models
DECODE_UTILISATION = 0.45


@dataclass(frozen=True)
class GpuRates:
    """A GPU kind's published peaks; a job's work is estimated at FLOPS_UTILISATION and DECODE_UTILISATION of them."""
    name: str
    peak_flops: float  #: dense bfloat16 tensor FLOP/s, without sparsity
    peak_bytes_per_s: float  #: memory bandwidth
    capability: tuple[int, int] | None = None  #: CUDA compute capability where known (bfloat16 from 8.0 on)

    @property
    def flops(self) -> float:
        """Sustained FLOP/s of forward and backward passes and of a prefill."""
        return FLOPS_UTILISATION * self.peak_flops

    @property
    def decode_bytes_per_s(self) -> float:
        """Bytes per second a decode step streams from GPU memory."""
        return DECODE_UTILISATION * self.peak_bytes_per_s

    def source(self) -> str:
        return (f"{self.name} stated rates: {FLOPS_UTILISATION:.0%} of {self.peak_flops / 1e12:g} TFLOP/s bf16, "
                f"{DECODE_UTILISATION:.0%} of {self.peak_bytes_per_s / 1e12:g} TB/s")


#: compute.gpu_kind -> its peaks, from NVIDIA's data sheets (SXM boards; dense bf16 tensor FLOP/s, memory
#: bandwidth): H100 SXM 989 TFLOP/s, 3.35 TB/s HBM3; H200 SXM the H100's compute, 4.8 TB/s HBM3e; A100 SXM
#: 80GB 312 TFLOP/s, 2.039 TB/s HBM2e
GPU_RATES = {
    "h100": GpuRates("H100", 989e12, 3.35e12, (9, 0)),
    "h200": GpuRates("H200", 989e12, 4.8e12, (9, 0)),
    "a100": GpuRates("A100", 312e12, 2.039e12, (8, 0)),
}
#: what a decode step costs beside its memory traffic: about 30 kernel launches per layer at ~10 us each
DECODE_SECONDS_PER_LAYER = 3e-4
#: the one train step measured at a preset's real size (docs/gpu-runs.md, 2026-11-27, one H200): the paper
#: preset's Qwen3-4B step (32 prompts x 8, 250 tokens, 500-token prompts, LoRA r 32, gradient checkpointing,
#: beta 0.1, accumulation 8, hardex's graph decode) took 79.2 s, where the stated rates give 28.1 s
MEASURED_STEP_S, STATED_STEP_S = 79.2, 28.1
#: a train step takes this many times what the stated rates give (2.8x), so that the measured step is predicted.
#: How that step split between rollouts and backward passes was not measured, so the whole step is scaled, not
#: one rate; probe and evaluate jobs (no step of theirs measured) keep the stated rates
TRAIN_STEP_FACTOR = MEASURED_STEP_S / STATED_STEP_S
#: Slurm's runtime is compute.runtime_min (start, model loading) + the estimate times this, times the attempt.
#: 1.5 before the measurement, which overran that limit by 1.7x (22 h at its pace, 13.3 h asked); 2 is above
#: that error: the corrected step rests on one first step of one model on one card. A train job that still
#: cannot finish stops after its first steps, naming the rate to set (hardex.time_limit)
RUNTIME_SAFETY = 2.0


def gpu_rates(cfg: dict) -> GpuRates:
    """The stated rates of the config's GPU: compute.gpu_rates where a user states another card's peaks, else
    compute.gpu_kind's (an H100's where neither is set)."""
    compute = cfg.get("compute") or {}
    if stated := compute.get("gpu_rates"):
        cap = stated.get("compute_capability")  # 7.5 -> (7, 5)
        return GpuRates(stated.get("name") or "compute.gpu_rates", stated["tflops"] * 1e12, stated["hbm_gbps"] * 1e9,
                        None if cap is None else (int(cap), round(cap * 10) % 10))
    return GPU_RATES[compute.get("gpu_kind") or "h100"]


def rates_key(cfg: dict) -> str:
    """The config key the rates come from, as messages name it."""
    return "compute.gpu_rates" if (cfg.get("compute") or {}).get("gpu_rates") else "compute.gpu_kind"


def generation_seconds(s: Shape, n_params: int, nbytes: int, *, prompts: int, samples: int, prompt_tokens: int,
                       max_new_tokens: int, budget: int, max_batch_prompts: int, top_p: float = 1.0,
                       rates: GpuRates = GPU_RATES["h100"]) -> float:
    """GPU seconds to sample `samples` completions of `max_new_tokens` for each of `prompts` prompts in the
    batches HFGenerator packs: each batch's prefill (2 FLOPs per parameter and prompt token at the rates'
    FLOP/s) and max_new_tokens decode steps, each streaming the weights, the batch's KV cache (half full on
    average) and its sampler's logits at their bytes per second, plus its per-layer overhead."""
    batch = hf_batch(budget, samples, prompt_tokens, max_new_tokens, max_batch_prompts, prompts)
    batches = math.ceil(prompts / batch.prompts)
    traffic = (n_params * nbytes + batch.rows * (prompt_tokens + max_new_tokens / 2) * s.kv_bytes_per_token(nbytes)
               + batch.rows * sampling_bytes_per_row(s, nbytes, top_p))
    decode = batches * max_new_tokens * (traffic / rates.decode_bytes_per_s + s.layers * DECODE_SECONDS_PER_LAYER)
    return decode + 2 * n_params * prompts * prompt_tokens / rates.flops


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
    recompute under gradient checkpointing and 2 for the reference model's forward when beta > 0, at the
    FLOP/s of compute.gpu_kind, times TRAIN_STEP_FACTOR (what a measured step took over this estimate);
    grpo.processes share the work."""
    sized = _sized(cfg, model)
    if sized is None:
        return None
    s, n = sized
    grpo = grpo_settings(cfg, model)
    prompt, completion = int(cfg["compute"].get("prompt_tokens") or 512), grpo["max_completion_length"]
    completions = completions_per_step(grpo)
    flops = 2 + (4 if grpo["finetune"] == "full" else 2) + (2 if grpo["gradient_checkpointing"] else 0) \
        + (2 if grpo["beta"] > 0 else 0)
    rates = gpu_rates(cfg)
    backprop = completions * (prompt + completion) * flops * n / rates.flops
    nbytes = DTYPE_BYTES["bfloat16"]
    if grpo["rollouts"] == "trl":
        rollouts = generation_seconds(s, n, nbytes, prompts=completions, samples=1, prompt_tokens=prompt,
                                      max_new_tokens=completion, budget=completions * (prompt + completion),
                                      max_batch_prompts=completions, top_p=grpo["top_p"], rates=rates)
    else:  # hardex's generator (vLLM's engines and server are faster: an upper bound)
        rollouts = generation_seconds(s, n, nbytes, prompts=grpo["prompts_per_step"], samples=grpo["num_generations"],
                                      prompt_tokens=prompt, max_new_tokens=completion, budget=ROLLOUT_TOKEN_BUDGET,
                                      max_batch_prompts=ROLLOUT_MAX_BATCH_PROMPTS, top_p=grpo["top_p"],
                                      rates=rates)
    return steps * (backprop + rollouts) * TRAIN_STEP_FACTOR / grpo["processes"]


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
                                  top_p=top_p, rates=gpu_rates(cfg))
               for prompts, samples, new, top_p in work if prompts)


def runtime_minutes(cfg: dict, model: str, seconds: float | None, attempt: int) -> int:
    """Slurm's runtime (-t, minutes) of a model job: on GPUs compute.runtime_min + RUNTIME_SAFETY x the
    estimated seconds; on a CPU, or where the work cannot be estimated, compute.runtime_min +
    compute.runtime_min_per_b x size_b. Times the attempt: a retry asks for more."""
    c = cfg["compute"]
    if seconds is None or not c.get("gpu"):  # the rates are a GPU's
        return int((c["runtime_min"] + c["runtime_min_per_b"] * cfg["models"][model]["size_b"]) * attempt)
    return int(math.ceil(c["runtime_min"] + RUNTIME_SAFETY * seconds / 60) * attempt)


def train_time_limit(cfg: dict, model: str, runtime: float | None, started: float | None = None) -> TimeLimit | None:
    """What a train job's first steps are held to (hardex.time_limit): its `runtime` resource (minutes, this
    module's estimate times the attempt) from `started`, the step it planned and the rates it planned at; None
    without a runtime. Enforced where Slurm runs the job (its limit kills it); elsewhere the job only says."""
    if not isinstance(runtime, (int, float)) or runtime <= 0:
        return None
    try:
        planned = train_seconds(cfg, model, 1)
        rates = gpu_rates(cfg)
    except (KeyError, TypeError):  # a config without its defaults: no rate to name
        planned = rates = None
    return TimeLimit(runtime * 60, time.time() if started is None else started, "SLURM_JOB_ID" in os.environ,
                     planned, rates and {"name": rates.name, "tflops": rates.peak_flops / 1e12,
                                         "hbm_gbps": rates.peak_bytes_per_s / 1e9},
                     (cfg.get("compute") or {}).get("runtime_min"))


# ---- a job's runtime from its inputs, for the rules' `runtime` resource -----------------------------------------

def file_rows(path: str | Path | None) -> int | None:
    """Rows of a parquet file, or None while it does not exist."""
    import pyarrow.parquet as pq  # planning imports this module; pyarrow only where a runtime reads a file

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
    grpo = run_grpo_settings(cfg, model, strategy)
    if not grpo.get("epochs"):
        return grpo["max_steps"]
    rows = file_rows(subset)
    if rows is None:
        pool_rows = split_rows(cfg, cfg["tasks"][task]["pool"], pool)
        rows = pool_rows and math.ceil(cfg["selection"]["budget"] * pool_rows)
    return run_steps(grpo, rows) if rows else None


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
    return sampling_minutes(cfg, model, probe_work(cfg, task, pool), attempt)


def probe_work(cfg: dict, task: str, pool) -> list[tuple]:
    """(prompts, samples, max_new_tokens, top_p) of a probe job: k samples of every pool prompt (adaptive
    probing stops sampling some earlier: an upper bound)."""
    p = probe_settings(cfg, task)
    return [(split_rows(cfg, cfg["tasks"][task]["pool"], pool), p["k"], p["max_new_tokens"], p.get("top_p", 1.0))]


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
    work = evaluation_work(cfg, benchmarks, paths, checkpoints(cfg, model, strategy, steps))
    return sampling_minutes(cfg, model, work, attempt)


def checkpoints(cfg: dict, model: str, strategy: str, steps: int) -> int:
    """The checkpoints a run's evaluation reads: every save_steps, and the last."""
    return math.ceil(steps / run_grpo_settings(cfg, model, strategy)["save_steps"]) + 1


# ---- GPUs per job, and GPU-hours of a whole config, printed with the memory plan ------------------------------

def generation_gpus(cfg: dict) -> int:
    """GPUs of a probe or evaluate job: compute.gpu, times tensor_parallel_size for a vLLM engine split over GPUs."""
    gen = cfg["generation"]
    return cfg["compute"]["gpu"] * (gen["vllm"]["tensor_parallel_size"] if gen["backend"] == "vllm" else 1)


def train_gpus(cfg: dict, model: str) -> int:
    """GPUs of a train job: compute.gpu for each training process, and for each GPU of a vLLM server of its own."""
    grpo = grpo_settings(cfg, model)
    server = grpo["vllm_server_gpus"] if grpo["rollouts"] == "vllm-server" else 0
    return cfg["compute"]["gpu"] * (grpo["processes"] + server)


def gpu_shortfall(cfg: dict, available: int | None) -> str | None:
    """One line where a job asks more GPUs than Snakemake may hand out (`--resources gpu=N`: `available`), or None.
    Snakemake would not refuse it but run it on N: a train job's ranks would then share them."""
    if available is None or not cfg["compute"]["gpu"]:
        return None
    for model in cfg["models"]:
        grpo, need = grpo_settings(cfg, model), train_gpus(cfg, model)
        if need > available:
            server = f" + {grpo['vllm_server_gpus']} of its vLLM server" if grpo["rollouts"] == "vllm-server" else ""
            return (f"models.{model}: a train job takes {need} GPUs (compute.gpu {cfg['compute']['gpu']} for each of "
                    f"grpo.processes {grpo['processes']}{server}), more than --resources gpu={available}: Snakemake "
                    f"would run it on {available}, its processes sharing them; "
                    "lower grpo.processes or raise the resource")
    if (need := generation_gpus(cfg)) > available:
        return (f"compute.gpu: a probe or evaluate job takes {need} GPUs, more than --resources gpu={available}: lower "
                f"compute.gpu (GPUs per job, not the node's count) or raise the resource")
    return None


def granted_gpus(resource_settings) -> int | None:
    """The `gpu` of Snakemake's --resources (its ResourceSettings: `workflow.resource_settings`), None if not given."""
    value = resource_settings.resources.get("gpu")
    value = getattr(value, "value", value)  # parsed: a Resource
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class MeasuredTrain:
    """The train steps a model's runs recorded in this working directory: their summed step_time against
    train_seconds' estimate of as many steps at the stated rates."""
    steps: int
    seconds: float
    estimate: float
    where: str

    @property
    def factor(self) -> float:
        """Measured seconds per estimated second: above 1, the GPU is slower than its stated rates."""
        return self.seconds / self.estimate


def measured_train(cfg: dict, model: str, root: Path = Path(".")) -> MeasuredTrain | None:
    """The steps every run of `model` under `root` recorded (steps.parquet: each optimizer step's wall time,
    rollouts included), None where there are none or the model's work cannot be estimated. Their count is read
    from the records, so a run of more steps planned now is still compared with as many steps as were made; a
    step's size is the config's (steps made under other grpo settings, or on a CPU, give a rate that is not
    this config's GPU's: the printed line names the records and the factor)."""
    import pyarrow.parquet as pq

    pattern = layout.fill(layout.STEPS, model=model, task="*", strategy="*", seed="*")
    seconds, steps = 0.0, 0
    for path in sorted(root.glob(pattern)):
        try:
            times = [t for t in pq.read_table(path, columns=["step_time"]).column(0).to_pylist() if t]
        except (OSError, ValueError, KeyError):
            continue  # a damaged or older record: the train job names it, not planning
        seconds, steps = seconds + sum(times), steps + len(times)
    estimate = train_seconds(cfg, model, steps) if steps else None
    if not estimate:
        return None
    return MeasuredTrain(steps, seconds, estimate, pattern.split("/*")[0])


@dataclass(frozen=True)
class StageHours:
    """GPU-hours of one stage of a model's jobs: jobs, GPUs each, and their work in GPU-hours (None where
    some job's work is unknown while planning)."""
    jobs: int
    gpus: int
    hours: float | None


def _hours(seconds: list[float | None], gpus: int) -> float | None:
    return None if any(s is None for s in seconds) else sum(seconds) * gpus / 3600


def gpu_hours(cfg: dict, model: str, benchmarks: Callable[[str, bool], list[dict]],
              measured: MeasuredTrain | None = None, probed: list[str] | None = None) -> dict[str, StageHours]:
    """probe, train and evaluate (base and runs) of `model`: every job of the config, each job's work (the
    estimates Slurm's runtime is made of, without compute.runtime_min or the safety factor) times its GPUs;
    train at the measured rate where one is given. `benchmarks(task, base)` is a task's benchmark params (ref
    and decoding) as the base's or a run's evaluate job gets them (rules/common.smk); `probed`: the tasks
    that are probed (all by default; a task whose pass rates come from a file has no probe job). Seeds of a
    sequential design: its maximum. Split sizes: their files where they exist, else what the config says."""
    tasks = model_tasks(cfg, model)
    runs = [(t, s) for t in tasks for s in run_strategies(cfg)] * len(seed_list(cfg))
    gen_gpus, seeds = generation_gpus(cfg), len(seed_list(cfg))
    probe = [sampling_seconds(cfg, model, probe_work(cfg, t, layout.data_file(cfg["tasks"][t]["pool"])))
             for t in tasks if probed is None or t in probed]
    train, evaluate = [], []
    for t in tasks:
        bench = benchmarks(t, True)
        paths = [layout.data_file(b["ref"]) for b in bench]
        evaluate.append(sampling_seconds(cfg, model, evaluation_work(cfg, bench, paths, seeds)))
    for t, strategy in runs:
        steps = run_steps_planned(cfg, model, t, strategy, None, layout.data_file(cfg["tasks"][t]["pool"]))
        seconds = train_seconds(cfg, model, steps) if steps else None
        train.append(seconds * measured.factor if seconds is not None and measured else seconds)
        bench = benchmarks(t, False)
        work = evaluation_work(cfg, bench, [layout.data_file(b["ref"]) for b in bench],
                               checkpoints(cfg, model, strategy, steps)) if steps else None
        evaluate.append(sampling_seconds(cfg, model, work) if work else None)
    return {"probe": StageHours(len(probe), gen_gpus, _hours(probe, gen_gpus)),
            "train": StageHours(len(train), train_gpus(cfg, model), _hours(train, train_gpus(cfg, model))),
            "evaluate": StageHours(len(evaluate), gen_gpus, _hours(evaluate, gen_gpus))}


def _h(hours: float | None) -> str:
    return "?" if hours is None else f"{hours:.0f}" if hours >= 100 else f"{hours:.3g}"


def gpu_hours_lines(cfg: dict, benchmarks: Callable[[str, bool], list[dict]], probed: list[str] | None = None,
                    root: Path = Path(".")) -> list[str]:
    """What `snakemake -n` prints of a GPU config: the rates' source, then one line per model (jobs, GPUs per
    job and GPU-hours of probe, train and evaluate, and their total), a model with train steps recorded under
    `root` training at their measured rate, said on its line. None on a CPU (no GPU rate applies)."""
    if not _on_gpus(cfg):
        return []
    rates = gpu_rates(cfg)
    upto = "up to " if seed_design(cfg) else ""
    lines = [f"GPU-hours of each model's jobs, their work estimated at {rates.source()} ({rates_key(cfg)}), "
             f"model loading and Slurm's margin not counted:"]
    for model in cfg["models"]:
        measured = measured_train(cfg, model, root)
        stages = gpu_hours(cfg, model, benchmarks, measured, probed)
        known = [s.hours for s in stages.values() if s.hours is not None]
        total = _h(sum(known)) + ("+?" if len(known) < len(stages) else "") if known else "?"
        parts = [f"{name} {upto if name != 'probe' else ''}{s.jobs} job{'s' if s.jobs != 1 else ''} x {s.gpus} "
                 f"GPU{'s' if s.gpus != 1 else ''} {_h(s.hours)} h" for name, s in stages.items()]
        rate = (f"train at the rate measured in {measured.where} ({measured.steps} steps, {measured.factor:.2f}x "
                f"the {rates.name} stated estimate)" if measured else f"{rates.name} stated rates")
        lines.append(f"  {model}: {', '.join(parts)}; total {total} GPU-hours ({rate})")
    if any("? h" in line for line in lines):
        lines.append("  ?: a job whose work is unknown while planning (the model's architecture, or a split's size "
                     "before its data exists)")
    if line := gpus_per_job_line(cfg):
        lines.append(f"  {line}")
    return lines


#: GPUs of the largest common node: a run trains on one node (hardex.launch: accelerate's --num_machines 1)
NODE_GPUS = 8


def gpus_per_job_line(cfg: dict) -> str | None:
    """Where compute.gpu is above 1, what it means in GPUs per job (users read it as the node's count: 8 GPUs
    a probe and 64 a train job of 8 processes), or None at compute.gpu 0 or 1."""
    gpu = cfg["compute"]["gpu"]
    if gpu <= 1:
        return None
    train = {model: train_gpus(cfg, model) for model in cfg["models"]}
    most = max(train.values())
    over = (f"; {most} is more than a {NODE_GPUS}-GPU node holds, and a run trains on one node"
            if most > NODE_GPUS else "")
    return (f"compute.gpu {gpu} is each job's GPUs, not the node's: a train job takes "
            f"{', '.join(f'{n} ({m})' for m, n in train.items())}, a probe or evaluate job {generation_gpus(cfg)}"
            f"{over} (one GPU a job on an {NODE_GPUS}-GPU node: compute.gpu 1 with --resources gpu={NODE_GPUS}; "
            f"docs/your-own-run.md, section 3)")


def print_gpu_hours(cfg: dict, benchmarks: Callable[[str, bool], list[dict]], probed: list[str] | None = None) -> None:
    """For the Snakefile: gpu_hours_lines on stderr (so `snakemake -n` shows them beside the memory plan)."""
    lines = gpu_hours_lines(cfg, benchmarks, probed)
    if lines:
        print("hardex: " + "\n".join(lines), file=sys.stderr)
