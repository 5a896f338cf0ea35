"""The memory plan of a config: every model job's peak GPU memory estimated at planning time, and a refusal for
a plan that cannot fit.

`plan(cfg)` sizes, for each model of a checked config, its three kinds of GPU job, `train`, `probe` and
`evaluate`, from the model's architecture and the settings each job runs with (the estimates are
hardex.memory_estimate's). `check_plan(cfg)` raises a PlanError for the first job whose estimate exceeds
`compute.gpu_memory_gb`, naming the config keys that would make it fit, with the numbers
(hardex.memory_advice); `format_plan` prints the table at planning time, and `check_plan_or_exit` is the
Snakefile's entry.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

from hardex.generation.sampling import Sampling
from hardex.memory_advice import advise
from hardex.memory_estimate import Estimate, estimate_generation, estimate_train, usable_gib
from hardex.model_shape import model_architecture
from hardex.precision import DTYPE_NAMES, resolve_precision
from hardex.settings import decodings, generation_settings, grpo_settings, known_split_size, probe_settings


class PlanError(ValueError):
    """A plan with a job that cannot fit its GPU; str() is one line: the job, its estimate, the GPU's
    memory and what to change."""


@dataclass
class JobPlan:
    """One model's job of one kind: its estimate, the GPU memory it was checked against (None: no
    `compute.gpu_memory_gb`), whether it fits (None when nothing was checked) and, when it does not, what
    to change in the config's own keys."""

    model: str
    kind: str
    estimate: Estimate
    device_gb: float | None
    fits: bool | None
    advice: str = ""
    micro_batch: str = ""
    architecture: str = ""  # where the sizes came from

    @property
    def notes(self) -> list[str]:
        return [f"architecture: {self.architecture}", *self.estimate.notes]


# ---- the plan of a config -------------------------------------------------------------------------


@dataclass
class _Job:
    """What one JobPlan's estimate is computed from, so that advice can recompute it with a change
    (hardex.memory_advice's PlannedJob)."""

    kind: str
    arch: dict | None
    kwargs: dict[str, Any]
    variant: str = ""  # probe: the task, evaluate: the benchmark that needs the most

    def estimate(self, **changes) -> Estimate:
        kw = {**self.kwargs, **changes}
        e = estimate_train(self.arch, **kw) if self.kind == "train" else estimate_generation(self.arch, **kw)
        if self.variant:
            e.notes.insert(0, f"{self.variant} (the largest)")
        return e


def plan(cfg: dict) -> list[JobPlan]:
    """One JobPlan per model and job kind (train, probe, evaluate) of a checked config (check_config's
    result: defaults filled). probe and evaluate take the task or benchmark that needs the most memory."""
    compute = cfg.get("compute") or {}
    device_gb = compute.get("gpu_memory_gb")
    gpu = (compute.get("gpu") or 0) > 0 or device_gb is not None
    device = "cuda" if gpu else "cpu"
    checked = device_gb if gpu else None
    prompt_tokens = int(compute.get("prompt_tokens") or 512)
    gen = cfg["generation"]
    plans: list[JobPlan] = []
    for model, entry in cfg["models"].items():
        arch, source = model_architecture(entry)
        parameters = int(round(float(entry.get("size_b") or 0) * 1e9))
        # what each job loads, whatever the model's dtype: training (hardex.precision.policy_dtype) float32 for a
        # full fine-tune and under grpo.precision fp32, else bfloat16 on a GPU, and float32 on a CPU (an upper
        # bound); the transformers generator (generation.hf.pick_dtype) reads auto as bfloat16 on a GPU and as
        # the CPU's precision on a CPU (bfloat16 where it has it in hardware: this machine's, where CPU jobs run);
        # vLLM's auto is the config's dtype, a float32 one served in 16 bits
        dtype = entry.get("dtype", "auto")
        hf_dtype = dtype if dtype != "auto" else "bfloat16" if gpu else DTYPE_NAMES[resolve_precision("auto", True)]
        vllm_dtype = dtype if dtype != "auto" else "bfloat16"
        grpo = grpo_settings(cfg, model)
        float32_policy = not gpu or grpo["finetune"] == "full" or grpo["precision"] == "fp32"
        jobs = [_Job("train", arch, dict(dtype="float32" if float32_policy else "bfloat16", finetune=grpo["finetune"],
                                         lora=grpo["lora"], grpo=grpo, prompt_tokens=prompt_tokens, device_gb=checked,
                                         parameters=parameters, device=device))]
        # the batch the generator packs: the model's own token budget where it sets one, as its jobs run
        common = dict(dtype=vllm_dtype if gen["backend"] == "vllm" else hf_dtype,
                      batch_tokens=generation_settings(cfg, model)["token_budget"],
                      backend=gen["backend"], vllm_share=gen["vllm"].get("gpu_memory_utilization"), device_gb=checked,
                      prompt_tokens=prompt_tokens, max_batch_prompts=gen["max_batch_prompts"],
                      max_model_len=gen["vllm"].get("max_model_len"), parameters=parameters, device=device)
        probes = []
        for task in cfg["tasks"]:
            if (cfg["tasks"][task].get("probe") or {}).get("from"):
                continue  # its pass rates are imported: no probe job loads the model
            p = probe_settings(cfg, task)
            adaptive = p.get("adaptive") or {}
            # adaptive probing asks for few samples per call: more prompts share a batch, a larger prefill
            samples = min(adaptive["min_samples"], adaptive["round_size"]) if adaptive.get("enabled") else p["k"]
            prompts = known_split_size(cfg, cfg["tasks"][task]["pool"])
            if not adaptive.get("enabled"):  # a full probe generates one chunk of the pool at a time
                prompts = min(prompts or p["chunk_size"], p["chunk_size"])
            probes.append((task, dict(common, samples=samples, max_new_tokens=p["max_new_tokens"],
                                      top_p=Sampling.from_config(p).top_p, prompts=prompts)))
        if probes:
            jobs.append(_worst("probe", arch, probes))
        full = grpo["finetune"] == "full"
        # the base model takes evaluation.base_pass_k samples on each task's first benchmark
        base_k = {t["benchmarks"][0]: cfg["evaluation"].get("base_pass_k") or 0 for t in cfg["tasks"].values()}
        evals = [(ref, dict(common, samples=max(dec["n_samples"], base_k.get(ref, 0)),
                            max_new_tokens=dec["max_new_tokens"], top_p=Sampling.from_config(dec).top_p,
                            weight_copies=3 if full else 1,
                            lora=None if full else grpo["lora"], prompts=known_split_size(cfg, ref)))
                 for ref, dec in decodings(cfg).items()]
        jobs.append(_worst("evaluate", arch, evals))
        for job in jobs:
            e = job.estimate()
            fits = None if checked is None else e.fits(checked)
            advice = "" if fits is not False else advise(cfg, model, job, checked, grpo, e)
            plans.append(JobPlan(model=model, kind=job.kind, estimate=e, device_gb=checked, fits=fits, advice=advice,
                                 micro_batch=e.batch, architecture=source))
    return plans


def _worst(kind: str, arch: dict | None, variants: list[tuple[str, dict]]) -> _Job:
    """The variant (task or benchmark) of a generation job with the largest estimate."""
    name, kw = max(variants, key=lambda v: estimate_generation(arch, **v[1]).total)
    return _Job(kind, arch, kw, f"{'task' if kind == 'probe' else 'benchmark'} {name}")


# ---- what a job declares ------------------------------------------------------------------------

# a CPU job declares its planned peak and a quarter more: the allocator's slack and what the plan does not count
# (on the runs measured, estimates came within 0.84-1.14 of the jobs' peaks: docs/memory-plan.md)
HOST_SLACK = 1.25


def host_memory_mb(cfg: dict) -> dict[tuple[str, str], int]:
    """The host memory (MB, Snakemake's `mem_mb`) a model's train, probe and evaluate jobs declare, by (model,
    kind), where the plan estimates it: on a CPU run, for models whose architecture is known and readable. Elsewhere
    the rules keep the size formula (compute.mem_mb, mem_mb_per_b): on a GPU the plan is the card's memory; an
    unknown architecture's estimate counts the weights alone; a local config.json the plan cannot read is the first
    job's to refuse, in one line; and a rehearsal's stand-ins are planned as the real model they stand in for."""
    if gpu_jobs(cfg):
        return {}
    declared = {}
    for model, entry in cfg["models"].items():
        if entry.get("path") == "standin":
            continue
        try:
            plans = plan({**cfg, "models": {model: entry}})
        except (KeyError, TypeError, ValueError):
            continue
        declared.update({(p.model, p.kind): math.ceil(p.estimate.total * HOST_SLACK * 1024) for p in plans
                         if not _unknown(p)})
    return declared


# ---- refusal and table ----------------------------------------------------------------------------


def check_plan(cfg: dict) -> list[JobPlan]:
    """The plan of a checked config; raises PlanError for the first job that cannot fit
    `compute.gpu_memory_gb` (nothing is refused without it, nor on a CPU run)."""
    plans = plan(cfg)
    for p in plans:
        if p.fits is False:
            why = f" ({p.estimate.problems[0]})" if p.estimate.problems and "no change" not in p.advice else ""
            raise PlanError(f"{p.kind} job of model {p.model!r}: about {p.estimate.total:.1f} GiB of GPU memory{why}, "
                            f"more than the {usable_gib(p.device_gb):.1f} GiB usable of compute.gpu_memory_gb "
                            f"{p.device_gb:g}; {p.advice}")
    return plans


def gpu_jobs(cfg: dict) -> bool:
    """Whether a config's model jobs run on GPUs (compute.gpu) or declare a GPU's memory to be checked."""
    compute = cfg.get("compute") or {}
    return (compute.get("gpu") or 0) > 0 or compute.get("gpu_memory_gb") is not None


def check_plan_or_exit(cfg: dict, show: bool) -> None:
    """For the Snakefile: a plan with a GPU job that cannot fit prints one line and exits before any job
    runs; with GPU jobs and `show`, the estimates are printed (to stderr, so `snakemake -n` shows them)."""
    if not gpu_jobs(cfg):
        return
    try:
        plans = check_plan(cfg)
    except PlanError as e:
        print(f"hardex: memory plan: {e}", file=sys.stderr)
        sys.exit(1)
    if show:
        print(f"hardex: memory plan (GiB per job at its peak, estimated):\n{format_plan(plans)}", file=sys.stderr)


def format_plan(plans: list[JobPlan]) -> str:
    """An aligned table of the plan: model, job, micro-batch, estimate, its biggest parts, device, fits."""
    header = ("model", "job", "batch", "GiB", "biggest parts", "device", "fits")
    rows = [header]
    for p in plans:
        parts = ", ".join(f"{name} {gib:.1f}" for name, gib in p.estimate.biggest(3))
        fits = {None: "-", True: "yes", False: "NO"}[p.fits] + ("*" if _unknown(p) and p.fits else "")
        rows.append((p.model, p.kind, p.micro_batch, f"{p.estimate.total:.1f}", parts,
                     "-" if p.device_gb is None else f"{p.device_gb:g}", fits))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    right = {3}  # numbers right-aligned
    lines = ["  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
             for r in rows]
    for p in plans:
        if p.fits is False:
            lines.append(f"{p.model} {p.kind}: {p.advice}")
    for model in dict.fromkeys(p.model for p in plans if _unknown(p)):
        lines.append(f"* {model}: architecture unknown (no kept config.json of that hub id, no local directory): its "
                     f"estimates count the weights alone (size_b), a lower bound, and 'fits' may not hold. Is the "
                     f"hub id right? Set models.{model}.architecture to the kept hub id it shares an architecture "
                     f"with (src/hardex/architectures), or give a local directory")
    return "\n".join(lines)


def _unknown(p: JobPlan) -> bool:
    return p.architecture.startswith("unknown")
