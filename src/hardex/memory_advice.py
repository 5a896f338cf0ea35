"""What to change, in a config's own keys, so that a job of the memory plan that does not fit its GPU does: every
single change that suffices (gradient checkpointing, a larger gradient accumulation, a smaller vLLM share, LoRA in
place of full fine-tuning, a smaller token budget, 16-bit weights), with its numbers and the estimate it gives;
else two changes together; else how much memory the job needs at least.

The advice searches by asking the job for its estimate under each change (PlannedJob) and imports none of the
estimates' arithmetic (hardex.memory_estimate): what it reads of a job and of an estimate are the Protocols below.
"""

from __future__ import annotations

from typing import Any, Protocol

from hardex.devices import COLOCATED_MEMORY_SHARE
from hardex.schedule import completions_per_step

#: the largest share of the device a vLLM engine is advised to take
VLLM_MAX_SHARE = 0.95


class JobEstimate(Protocol):
    """What the advice reads of an estimate (hardex.memory_estimate.Estimate)."""

    problems: list[str]

    @property
    def total(self) -> float: ...

    def fits(self, device_gb: float) -> bool: ...


class PlannedJob(Protocol):
    """A job of the plan (hardex.memory_plan's _Job) as the advice sees it: its kind, the settings its estimate is
    made from (estimate_train's or estimate_generation's keyword arguments), and that estimate again with some
    of them changed."""

    kind: str
    kwargs: dict[str, Any]

    def estimate(self, **changes: Any) -> JobEstimate: ...


def advise(cfg: dict, model: str, job: PlannedJob, device_gb: float, grpo: dict, e: JobEstimate) -> str:
    """What to change, in the config's keys, so that the job fits: every single change that suffices, with
    its numbers and the estimate it gives; else two changes together; else how much memory the job needs."""
    options = _train_options(cfg, model, job, device_gb, grpo) if job.kind == "train" \
        else _generation_options(cfg, model, job, device_gb, grpo)
    fitting = [(text, est) for text, est in options if est.fits(device_gb)]
    if not fitting and job.kind == "train":
        fitting = _train_pairs(cfg, model, job, device_gb, grpo)
    if fitting:
        return "to fit, " + "; or ".join(f"{text} ({est.total:.1f} GiB)" for text, est in fitting)
    least = min([e, *(est for _, est in options)], key=lambda x: x.total)
    why = f" ({least.problems[0]})" if least.problems else ""
    return (f"no change of its settings makes it fit: it needs about {least.total:.1f} GiB at least{why}; "
            f"a GPU with more memory")


def _accumulation_text(cfg: dict, model: str, grpo: dict, n: int) -> str:
    completions = completions_per_step(grpo)
    return f"raise {_grpo_key(cfg, model, 'gradient_accumulation_steps')} to {n} (micro-batch {completions // n})"


def _train_options(cfg: dict, model: str, job: PlannedJob, device_gb: float,
                   grpo: dict) -> list[tuple[str, JobEstimate]]:
    """Each single change of a train job's settings that lowers its estimate, with the estimate it gives
    (the accumulation and the vLLM share: the value that fits, when one does)."""
    out = []
    if not grpo["gradient_checkpointing"]:
        out.append((f"set {_grpo_key(cfg, model, 'gradient_checkpointing')}: true",
                    job.estimate(grpo={**grpo, "gradient_checkpointing": True})))
    steps = _fitting_accumulation(job, device_gb, grpo)
    if steps:
        out.append((_accumulation_text(cfg, model, grpo, steps[0]), steps[1]))
    if grpo["rollouts"] == "vllm":
        share = _fitting_share(job, device_gb, grpo)
        if share:
            out.append((f"lower generation.vllm.gpu_memory_utilization to {share[0]:g}", share[1]))
    if grpo["finetune"] == "full":
        out.append((f"set {_grpo_key(cfg, model, 'finetune')}: lora",
                    job.estimate(finetune="lora", grpo={**grpo, "finetune": "lora"})))
    return out


def _train_pairs(cfg: dict, model: str, job: PlannedJob, device_gb: float, grpo: dict) -> list[tuple[str, JobEstimate]]:
    """Two changes together, where no single one suffices: LoRA and gradient checkpointing, or either with
    a larger accumulation."""
    changes = []
    if grpo["finetune"] == "full":
        changes.append(({"finetune": "lora"}, f"set {_grpo_key(cfg, model, 'finetune')}: lora"))
    if not grpo["gradient_checkpointing"]:
        changes.append(({"gradient_checkpointing": True},
                        f"set {_grpo_key(cfg, model, 'gradient_checkpointing')}: true"))
    out = []
    if len(changes) == 2:
        both = {**grpo, **changes[0][0], **changes[1][0]}
        est = job.estimate(grpo=both, finetune=both["finetune"])
        if est.fits(device_gb):
            out.append((f"{changes[0][1]} and {changes[1][1]}", est))
    for change, text in changes:
        changed = {**grpo, **change}
        steps = _fitting_accumulation(job, device_gb, changed)
        if steps:
            out.append((f"{text} and {_accumulation_text(cfg, model, grpo, steps[0])}", steps[1]))
    return out


def _fitting_accumulation(job: PlannedJob, device_gb: float, grpo: dict) -> tuple[int, JobEstimate] | None:
    """The smallest gradient_accumulation_steps above the current one that divides the step's completions
    (check_config requires it) and makes the job fit, from the grpo settings `grpo` (the model's, or with a change
    made: the job fine-tunes as they say)."""
    completions = completions_per_step(grpo)
    for n in _divisors(completions):
        if n > grpo["gradient_accumulation_steps"]:
            est = job.estimate(grpo={**grpo, "gradient_accumulation_steps": n}, finetune=grpo["finetune"])
            if est.fits(device_gb):
                return n, est
    return None


def _fitting_share(job: PlannedJob, device_gb: float, grpo: dict) -> tuple[float, JobEstimate] | None:
    """The largest vLLM share (in hundredths) below the current one with which the trainer and its engine
    both fit."""
    vllm = grpo.get("vllm") or {}
    current = vllm.get("gpu_memory_utilization") or COLOCATED_MEMORY_SHARE["cuda"]
    for hundredths in range(round(current * 100) - 1, 0, -1):
        est = job.estimate(grpo={**grpo, "vllm": {**vllm, "gpu_memory_utilization": hundredths / 100}})
        if est.fits(device_gb):
            return hundredths / 100, est
    return None


def _generation_options(cfg: dict, model: str, job: PlannedJob, device_gb: float,
                        grpo: dict) -> list[tuple[str, JobEstimate]]:
    """Each single change that lowers a probe or evaluate job's estimate: the vLLM share that fits, the
    largest token budget that fits, 16-bit weights, LoRA in place of full checkpoints."""
    kw = job.kwargs
    if kw["backend"] == "vllm":
        current = round((kw["vllm_share"] or 0.9) * 100)
        shares = [*range(current + 1, round(VLLM_MAX_SHARE * 100) + 1), *range(current - 1, 0, -1)]
        for hundredths in shares:
            est = job.estimate(vllm_share=hundredths / 100)
            if est.fits(device_gb):
                way = "raise" if hundredths > current else "lower"
                return [(f"{way} generation.vllm.gpu_memory_utilization to {hundredths / 100:g}", est)]
        return []
    out = []
    # the largest token budget, a multiple of 256 (the schema's least), that fits: a bisection
    lo, hi = 256, kw["batch_tokens"]
    if hi > lo and job.estimate(batch_tokens=lo).fits(device_gb):
        while hi - lo > 256:
            mid = (lo + hi) // 2 // 256 * 256
            lo, hi = (mid, hi) if job.estimate(batch_tokens=mid).fits(device_gb) else (lo, mid)
        own = cfg["models"][model].get("token_budget")
        text = (f"lower models.{model}.token_budget to {lo}" if own else
                f"set models.{model}.token_budget: {lo} (or lower generation.token_budget to {lo}, for every model)")
        out.append((text, job.estimate(batch_tokens=lo)))
    if kw["dtype"] == "float32":
        out.append((f"set models.{model}.dtype: bfloat16", job.estimate(dtype="bfloat16")))
    if job.kind == "evaluate" and kw.get("weight_copies", 1) > 1:
        out.append((f"set {_grpo_key(cfg, model, 'finetune')}: lora", job.estimate(weight_copies=1, lora=grpo["lora"])))
    return out


def _grpo_key(cfg: dict, model: str, name: str) -> str:
    """The config key a model's grpo setting comes from: its own override, else the grpo section."""
    return f"models.{model}.grpo.{name}" if name in (cfg["models"][model].get("grpo") or {}) else f"grpo.{name}"


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
