"""GRPO training of one model on one subset with TRL's GRPOTrainer (LoRA through PEFT, or full).

Every hyperparameter comes from the config's `grpo` section; TRL's `beta` and `loss_type` are
always set explicitly (their defaults changed between TRL versions). A callback writes one row
per optimizer step to a JSON-lines file in the checkpoint folder, so a resumed run keeps the
record of the steps before the kill; `steps.parquet` is written from it at the end.

Checkpoints live in `<run>/checkpoints/`, which the workflow does not declare as an output:
Snakemake deletes a failed job's declared outputs, and a killed run must find its checkpoints
again. A hash of what decides their content (the model's fingerprint, the scorer, the settings,
the seed, the rendered prompts and answers) guards them: checkpoints of anything else are never
resumed. Under a fixed schedule horizon (`grpo.schedule_steps`, hardex.schedule) the steps a run stops
at are not part of it: a finished run continues to more steps, or publishes the checkpoint at fewer, with
the record and weights of an uninterrupted run.

A run fails loudly rather than finish with fewer steps than asked: a subset smaller than one
step is refused (or repeated, when the config says so), and a run that ends early is an error.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import polars as pl

from hardex.devices import cuda_available
from hardex.io import checkpoint_steps, settings_hash, write_json_atomic, write_parquet_atomic
from hardex.metrics import learnable_pct
from hardex.precision import DTYPE_NAMES, resolve_precision, torch_dtype
from hardex.quantization import quantization_config
from hardex.schedule import RUN_END, past_horizon, run_steps, schedule_horizon
from hardex.tracking import tracker_args

STEP_RECORD = "steps.jsonl"  # beside the checkpoints: one JSON line per step, appended as it ends

STEP_COLUMNS = {
    "step": pl.Int64,
    "reward_mean": pl.Float64,
    "reward_std": pl.Float64,
    "frac_zero_std": pl.Float64,
    "loss": pl.Float64,
    "kl": pl.Float64,
    "completion_length": pl.Float64,
    "learning_rate": pl.Float64,
    "step_time": pl.Float64,
    "rollouts_generated": pl.Int64,  # completions sampled in the step, discarded ones included
    "rollouts_discarded": pl.Int64,  # online filtering: completions of groups dropped for agreeing rewards
    "tokens_generated": pl.Int64,
    "filter_capped": pl.Boolean,  # online filtering reached grpo.online_max_rounds (null: not filtering)
}
# TRL log key -> steps.parquet column
TRL_KEYS = {
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_zero_std",
    "loss": "loss",
    "kl": "kl",
    "completions/mean_length": "completion_length",
    "learning_rate": "learning_rate",
}


def checkpoint_damage(folder: Path) -> str | None:
    """Why a saved checkpoint cannot be resumed (a weight file or the trainer state cut short by a full
    disk or a kill during the save), or None when it is whole."""
    from safetensors import safe_open

    try:
        json.loads((folder / "trainer_state.json").read_text())
        for f in sorted(folder.glob("*.safetensors")):
            with safe_open(str(f), "pt"):  # reads the header, and checks the file holds all it announces
                pass
    except Exception as e:  # any unreadable part makes the whole checkpoint unusable
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


def _step_recorder(path: Path, counts: Callable[[], dict[str, Any]]):
    """A callback writing one row per step; `counts()` gives the step's rollouts generated and discarded,
    tokens generated and whether online filtering reached its cap."""
    from transformers import TrainerCallback

    class StepRecorder(TrainerCallback):
        """One JSON line per logged optimizer step (logging_steps = 1)."""

        def __init__(self):
            self.t0 = time.time()
            self.counts = counts  # the step's counts, as on_log reads them

        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.time()

        def on_log(self, args, state, control, logs=None, **kw):
            if not logs or "reward" not in logs:
                return
            for key in ("loss", "grad_norm"):  # fail loudly: later steps would train on garbage
                if not math.isfinite(logs.get(key) or 0.0):
                    raise FloatingPointError(f"{key.replace('_', ' ')} is {logs[key]} at step {state.global_step}; lower "
                                             f"the learning rate or check the rewards (last good checkpoint kept)")
            row = {col: logs.get(key) for key, col in TRL_KEYS.items()}  # TRL gathers these across processes
            row["step"] = state.global_step
            row["step_time"] = time.time() - self.t0
            row.update(summed_over_processes(counts(), getattr(args, "device", None)))  # nccl takes CUDA tensors only
            if state.is_world_process_zero:
                with open(path, "a") as fh:
                    fh.write(json.dumps(row) + "\n")

    return StepRecorder()


def summed_over_processes(counts: dict[str, Any], device=None) -> dict[str, Any]:
    """A step's rollout counts of every process (each generates its own share of the step's groups): summed,
    and capped if any process's online filtering was. Every process must call it (a collective).

    `device`: the process's own device (the trainer's `args.device`), where the reduced tensor must lie:
    accelerate starts the group with nccl on GPUs, which reduces CUDA tensors only (gloo, on a CPU, takes CPU
    tensors)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return counts
    numbers = [k for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool)]
    totals = torch.tensor([counts[k] for k in numbers] + [int(bool(counts.get("filter_capped")))], dtype=torch.int64,
                          device=device)
    dist.all_reduce(totals)
    totals = totals.tolist()
    out = {**counts, **dict(zip(numbers, totals))}
    if counts.get("filter_capped") is not None:
        out["filter_capped"] = bool(totals[-1])
    return out


def trl_rollout_counts(g: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """The step counts of TRL's own rollouts (its generate, or its vLLM server), which train on every completion
    of a step: each process counts its share of the step's prompts_per_step x num_generations completions (its
    slice of the batch), so that their sum over the processes (summed_over_processes) is the step's."""
    import torch.distributed as dist

    per_step = g["prompts_per_step"] * g["num_generations"]

    def counts() -> dict[str, Any]:
        processes = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        return {"rollouts_generated": per_step // processes, "rollouts_discarded": 0}  # config: it divides

    return counts


class TrainingError(RuntimeError):
    """A run that cannot train as configured; str() says why and what to change."""


def rows_per_epoch(rows: list[dict[str, Any]], g: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows TRL's sampler draws steps from, checked against what one step needs.

    TRL drops a last batch smaller than `prompts_per_step`: a subset smaller than one step would
    make no step at all and the job would "finish". That is refused, unless
    `grpo.repeat_small_subsets` asks for the subset to be repeated until a step is full (paper 1's
    text trains 32 prompts per step on 12-example subsets).
    """
    n, per_step = len(rows), g["prompts_per_step"]
    if n >= per_step:
        return rows
    if not g["repeat_small_subsets"]:
        raise TrainingError(
            f"the subset has {n} examples, fewer than the {per_step} prompts one GRPO step draws "
            f"(grpo.prompts_per_step): no step could be made. Lower prompts_per_step, raise selection.budget, "
            f"or set grpo.repeat_small_subsets: true to repeat examples within a step")
    return rows * math.ceil(per_step / n)


def subset_rows(subset: pl.DataFrame, pool: pl.DataFrame, task, render: Callable[[str], str]) -> list[dict[str, Any]]:
    """The trainer's rows of a subset, in its rank order: the rendered prompt and the reference answer
    (the subset file holds ids; the questions are the pool's)."""
    rows = subset.select("id", "rank").join(pool, on="id").sort("rank").to_dicts()
    return [{"prompt": render(task.prompt(r)), "answer": r["answer"]} for r in rows]


def task_reward(task, scale: float = 1.0) -> Callable[[str, str, str], float]:
    """The verifiable reward: `scale` for a completion the task's scorer accepts, else 0. A task's reward hook
    (tasks.<task>.reward) is called the same way in its place (hardex.controls.run_reward, hardex.reward_hook)."""
    return lambda completion, answer, prompt: scale * float(task.is_correct(completion, answer, prompt))


def check_lora_targets(model, targets: list[str], model_path: str) -> None:
    """Fail before the first step when a LoRA target name matches no linear layer of the model.

    PEFT matches a name against the ends of module names and says nothing when one never matches:
    phi-4 (Phi3) fuses q/k/v into `qkv_proj` and gate/up into `gate_up_proj`, so the seven names
    that suit Llama or Qwen would leave its attention input and MLP input untrained.
    """
    import torch
    from transformers.pytorch_utils import Conv1D

    names = [n for n, m in model.named_modules() if isinstance(m, (torch.nn.Linear, Conv1D))]
    missing = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
    if missing:
        leaves = sorted({n.rsplit(".", 1)[-1] for n in names})
        raise TrainingError(f"grpo.lora.target_modules {missing} match no linear layer of {model_path}; "
                            f"its linear layers are {', '.join(leaves)}")


def _trainer_class():
    import torch
    from trl import GRPOTrainer

    from hardex.models import encode_prompt

    class EpochOrder(torch.utils.data.Sampler):
        """TRL's sampler, drawing epoch e's order as an uninterrupted run does. TRL draws each epoch's order
        from one generator seeded once, so a run resumed in epoch e (a fresh sampler) trained on epoch 0's order
        again. The Trainer calls set_epoch(e) before each epoch: the generator is replayed to epoch e's draw."""

        def __init__(self, sampler):
            self.sampler = sampler

        def __iter__(self):
            return iter(self.sampler)

        def __len__(self):
            return len(self.sampler)

        def set_epoch(self, epoch: int) -> None:
            if self.sampler.shuffle and self.sampler.seed is not None:
                self.sampler.generator.manual_seed(self.sampler.seed)
                for _ in range(epoch):  # each epoch's __iter__ draws one permutation
                    torch.randperm(self.sampler.num_samples, generator=self.sampler.generator)

    class Trainer(GRPOTrainer):
        """TRL's GRPOTrainer, tokenizing prompts as probing and evaluation do (`encode_prompt`):
        TRL would add special tokens to text that already holds them (two BOS for Llama 3); training a
        quantized model's LoRA adapters in float32; its learning-rate schedule spanning `schedule_steps`
        (hardex.schedule); and each epoch's order the same whether the run was resumed or not."""

        def __init__(self, model, *args, schedule_steps: int | None = None, **kwargs):
            self.schedule_steps = schedule_steps
            super().__init__(model, *args, **kwargs)
            # TRL casts the trainable parameters of a 4- or 8-bit model to bfloat16 (QLoRA's recipe), and torch's
            # AdamW keeps no float32 copy: at GRPO's learning rates most updates would round away. Cast back
            # before train() creates the optimizer (autocast still computes in the run's precision).
            if getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_loaded_in_8bit", False):
                for param in self.model.parameters():
                    if param.requires_grad and param.dtype != torch.float32:
                        param.data = param.data.float()

        def _tokenize_prompts(self, prompts: list):
            if not isinstance(prompts[0], str):
                return super()._tokenize_prompts(prompts)
            return [encode_prompt(self.processing_class, p) for p in prompts], None, {}

        def _get_train_sampler(self, dataset=None):
            return EpochOrder(super()._get_train_sampler(dataset))

        def create_scheduler(self, num_training_steps: int, optimizer=None):
            return super().create_scheduler(self.schedule_steps or num_training_steps, optimizer)

    return Trainer


def policy_weights(model):
    """The policy's weights as (checkpoint name, tensor) pairs, a PEFT model's LoRA deltas added to its
    base weights (computed, not merged in place: the trained model is left as it is)."""
    import torch

    if not hasattr(model, "peft_config"):
        for name, param in model.named_parameters():
            yield name, param.detach()
        return
    base = model.get_base_model()
    adapter = model.active_adapter
    with torch.no_grad():
        for name, param in base.named_parameters():
            if ".lora_" in name:
                continue
            if ".base_layer." in name:
                layer = base.get_submodule(name.split(".base_layer.")[0])
                weight = param + layer.get_delta_weight(adapter) if name.endswith(".weight") else param
                yield name.replace(".base_layer.", "."), weight.detach()
            else:
                yield name, param.detach()


@contextlib.contextmanager
def adapters_merged(model):
    """While the block runs, a PEFT model's LoRA deltas are added into its base weights and its adapters
    bypassed, so that generation runs the base model's operators alone; after it, the base weights
    themselves are put back (not the sum minus the delta, which bfloat16 would round away from them).
    A model without adapters is left as it is."""
    import torch

    if not hasattr(model, "peft_config"):
        yield
        return
    adapter, saved = model.active_adapter, []
    try:
        with torch.no_grad():
            for module in model.get_base_model().modules():
                if hasattr(module, "get_delta_weight") and adapter in getattr(module, "lora_A", {}):
                    layer = module.get_base_layer()
                    merged = (layer.weight.float() + module.get_delta_weight(adapter).float()).to(layer.weight.dtype)
                    saved.append((layer, layer.weight))
                    layer.weight = torch.nn.Parameter(merged, requires_grad=False)
        with model.disable_adapter():
            yield
    finally:
        for layer, weight in saved:
            layer.weight = weight


def hardex_rollouts(g: dict[str, Any], seed: int, rows: list[dict[str, Any]] | None = None,
                    reward_fn: Callable[[str, str, str], float] | None = None, token_budget: int = 262144):
    """A TRL rollout function that samples the weights being trained with hardex's own generator: the
    transformers backend probing and evaluation use (`grpo.rollouts: hardex`; one prefill per prompt,
    finished rows leave the batch), or a vLLM engine in this process whose weights are replaced by the
    policy's before each step (`grpo.rollouts: vllm`; engine settings from `generation.vllm`).

    TRL hands over each prompt num_generations times in a row; each distinct prompt is encoded once
    and sampled num_generations times. Sample streams are keyed by (run seed, step, round, position),
    so a resumed run draws what an uninterrupted one would.

    With `g["online_filtering"]` (DAPO's dynamic sampling), a step scores its groups with `reward_fn`,
    drops those whose rewards all agree, and generates groups for further prompts drawn from `rows`
    (seeded by step and round) until it holds prompts_per_step mixed groups or has used
    `online_max_rounds` extra rounds; then it trains on what it has, its free slots filled with
    agreeing groups (no gradient), and marks the step as capped. The prompts and answers TRL scores are
    the ones returned (extra fields `answer` and `rollout_prompt`). `rollout.counts()` gives the last
    step's rollouts generated and discarded, tokens generated and whether the cap was reached.
    """
    import numpy as np

    from hardex.generation.sampling import Sampling
    from hardex.models import encode_prompt

    sampling = Sampling(g["temperature"], g["top_p"], g["max_completion_length"])
    vllm = g["rollouts"] == "vllm"
    online = bool(g.get("online_filtering"))
    if online and (not rows or reward_fn is None):
        raise ValueError("online filtering needs the run's rows and its reward to refill a step")
    state: dict[str, Any] = {"counts": {}}

    def generator(model, trainer):
        if vllm:
            from hardex.generation.vllm_backend import VLLMGenerator

            # the engine samples in the precision the policy computes in (its weights may be float32 master copies)
            dtype = DTYPE_NAMES[training_precision(g, use_cpu=next(model.parameters()).device.type == "cpu")]
            return VLLMGenerator(str(model.name_or_path), dtype=dtype, seed=seed, progress=False, in_process=True,
                                 tokenizer=trainer.processing_class, **g["vllm"])
        from hardex.generation.hf import HFGenerator

        # it samples the weights as they are (float32 under full fine-tuning, as on a CPU): their dtype sizes the
        # KV cache its token budget is checked against
        dtype = str(next(p.dtype for p in model.parameters() if p.is_floating_point())).removeprefix("torch.")
        return HFGenerator(str(model.name_or_path), model=model, tokenizer=trainer.processing_class, dtype=dtype,
                           token_budget=token_budget, progress=False)

    answer_of = {r["prompt"]: r["answer"] for r in rows or []}

    def refill(groups: list[tuple[str, str, list]], sample, step: int, tokenizer) -> tuple[list, bool, list]:
        """Online filtering of one step's (prompt, answer, completions) groups: the groups it trains
        on, whether it reached the cap, and the completions of the extra rounds it generated."""
        def agrees(prompt, answer, group) -> bool:
            texts = tokenizer.batch_decode(group, skip_special_tokens=True)
            return len({reward_fn(t, answer, prompt) for t in texts}) == 1

        kept, dropped = [], []
        for grp in groups:
            (dropped if agrees(*grp) else kept).append(grp)
        extra, round_ = [], 0
        while len(kept) < len(groups) and round_ < g["online_max_rounds"]:
            round_ += 1
            rng = np.random.default_rng([seed, step, round_])
            drawn = [rows[int(i)] for i in rng.choice(len(rows), min(len(groups), len(rows)), replace=False)]
            more = sample([r["prompt"] for r in drawn], round_)
            extra += [c for group in more for c in group]
            for r, group in zip(drawn, more):
                grp = (r["prompt"], r["answer"], group)
                (dropped if agrees(*grp) else kept).append(grp)
        capped = len(kept) < len(groups)
        return (kept + dropped)[: len(groups)], capped, extra  # at the cap, agreeing groups fill the free slots

    def rollout(prompts: list[str], trainer) -> dict[str, list]:
        n = trainer.num_generations
        groups = [prompts[i : i + n] for i in range(0, len(prompts), n)]
        if len(prompts) % n or any(len(set(group)) != 1 for group in groups):
            raise ValueError(f"expected each prompt {n} times in a row (TRL's sampler), got {len(prompts)} prompts")
        model = trainer.accelerator.unwrap_model(trainer.model)
        training = model.training  # read first: the transformers generator puts the model in eval mode
        if "generator" not in state:
            state["generator"] = generator(model, trainer)
        if vllm:
            state["generator"].load_weights(policy_weights(model))
        step = trainer.state.global_step
        step_seed = int(settings_hash({"seed": seed, "step": step}), 16) % 2**31
        tokenizer = trainer.processing_class

        first = trainer.accelerator.process_index * len(groups)  # this process's place in the step's groups

        def sample(distinct: list[str], round_: int) -> list[list[list[int]]]:
            keys = [str(first + j) if round_ == 0 else f"r{round_}-{first + j}" for j in range(len(distinct))]
            return state["generator"].generate_ids(distinct, n, sampling, seed=step_seed, desc="rollouts", keys=keys)

        distinct = [group[0] for group in groups]
        model.eval()  # in training mode, gradient checkpointing switches the KV cache off
        # on a CPU a decode step of a few rows is bound by the cost of each operator call, which unmerged
        # LoRA adapters add to every projection (docs/performance.md); a GPU keeps them unmerged, sparing
        # the merged weights' memory
        on_cpu = next(model.parameters()).device.type == "cpu"
        try:
            with adapters_merged(model) if on_cpu and not vllm else contextlib.nullcontext():
                completions = sample(distinct, 0)
                generated = [c for group in completions for c in group]
                capped = None
                if online:
                    trained, capped, extra = refill([(p, answer_of[p], c) for p, c in zip(distinct, completions)],
                                                    sample, step, tokenizer)
                    generated += extra
                    distinct, answers, completions = (list(t) for t in zip(*trained))
        finally:
            model.train(training)
        ids = [c for group in completions for c in group]
        state["counts"] = {"rollouts_generated": len(generated), "rollouts_discarded": len(generated) - len(ids),
                           "tokens_generated": sum(len(c) for c in generated), "filter_capped": capped}
        out = {"prompt_ids": [encode_prompt(tokenizer, p) for p in distinct for _ in range(n)],
               "completion_ids": ids,
               "logprobs": [[0.0] * len(c) for c in ids]}  # read by TRL only for vLLM's importance sampling
        if online:  # TRL scores what was returned: the refilled prompts with their own answers
            out["answer"] = [a for a in answers for _ in range(n)]
            out["rollout_prompt"] = [p for p in distinct for _ in range(n)]
        return out

    def close():
        """Stop a vLLM engine (its KV cache holds a share of the machine's memory)."""
        generator = state.pop("generator", None)
        if vllm and generator is not None:
            generator.close()

    rollout.close = close
    rollout.counts = lambda: state["counts"]
    return rollout


# grpo settings that GRPOConfig takes under the same name
SAME_NAME_IN_TRL = ("gradient_accumulation_steps", "num_generations", "learning_rate", "weight_decay", "adam_beta1",
                    "adam_beta2", "max_grad_norm", "max_completion_length", "temperature", "top_p", "beta", "loss_type",
                    "scale_rewards", "epsilon", "gradient_checkpointing", "save_steps")


def training_precision(g: dict[str, Any], use_cpu: bool) -> str:
    """grpo.precision resolved for this machine (hardex.precision.resolve_precision): `auto` is bf16 on a GPU of
    compute capability 8.0 or above and on a CPU with hardware bfloat16, fp32 elsewhere; bf16 on an older GPU
    is refused (PrecisionError)."""
    return resolve_precision(g["precision"], use_cpu)


def policy_dtype(g: dict[str, Any], use_cpu: bool):
    """The dtype the policy's weights load in. The weights the optimizer updates (full fine-tuning) are float32
    under any precision, on a CPU as on a GPU: torch's AdamW keeps no float32 copy of a 16-bit weight, and
    its small steps would vanish in bfloat16's 8 bits (or overflow fp16's loss scaling); autocast computes
    in 16 bits all the same. LoRA's frozen base loads in the precision's dtype (bfloat16, float16 or float32);
    its adapters are float32 (PEFT's default, restored after TRL's cast for a quantized base: _trainer_class)."""
    import torch

    if g["finetune"] == "full":
        return torch.float32
    return torch_dtype(training_precision(g, use_cpu))


def grpo_args(g: dict[str, Any], seed: int, out: Path, use_cpu: bool, steps: int, extra: dict | None = None):
    """The GRPOConfig for the config's grpo settings and a run of `steps` steps: every field explicit.
    `extra`: the tracker's arguments (hardex.tracking) and a vLLM server's (hardex.vllm_server); no tracker
    by default."""
    from trl import GRPOConfig

    precision = training_precision(g, use_cpu)
    return GRPOConfig(
        output_dir=str(out),
        max_steps=steps,
        # one optimizer step = prompts_per_step x num_generations completions, generated together
        # (TRL's steps_per_generation defaults to the accumulation) and back-propagated in micro-batches
        # in several processes (grpo.processes) each takes its share: the same global batch, the same steps
        per_device_train_batch_size=(g["prompts_per_step"] * g["num_generations"]
                                     // (g["gradient_accumulation_steps"] * g["processes"])),
        **{key: g[key] for key in SAME_NAME_IN_TRL},
        lr_scheduler_type=g["lr_scheduler"],
        warmup_steps=math.ceil(g["warmup_ratio"] * schedule_horizon(g, steps)),  # the schedule's, as its decay
        save_strategy="steps",
        save_total_limit=None,  # every checkpoint is evaluated for the training curves
        logging_steps=1,
        **{"report_to": [], **(extra or {})},
        seed=seed,
        data_seed=seed,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        use_cpu=use_cpu,
        disable_tqdm=False,
        dataloader_num_workers=0,
    )


#: grpo settings that change nothing a run computes: a resumed run keeps its checkpoints when they change
NOT_COMPUTED = ("report_to",)


def resume_settings(g: dict[str, Any]) -> dict[str, Any]:
    """The grpo settings that decide what a run's checkpoints hold: all but those that change nothing a run
    computes and, under a fixed schedule horizon (grpo.schedule_steps), those that only say where the run stops
    (max_steps, epochs: hardex.schedule): its checkpoints then serve a run to more steps, or to fewer."""
    left_out = NOT_COMPUTED + (RUN_END if g.get("schedule_steps") else ())
    return {k: v for k, v in g.items() if k not in left_out}


def _other_run(marker: Path, tag: str, g: dict[str, Any], seed: int, identity: dict | None, data: str) -> str | None:
    """What made the checkpoints beside `marker` that differs from this run (for the line of a run that starts
    afresh), or None when they are this run's."""
    if not marker.exists():
        return "a run without a record of its settings"
    old = json.loads(marker.read_text())
    if old.get("hash") == tag:
        return None
    if old.get("identity") != json.loads(json.dumps(identity, default=str)) or old.get("seed") != seed:
        return "another model, scorer, reward or seed"
    if old.get("data", data) != data:
        return "other prompts or answers"
    before, now = resume_settings(old.get("grpo", {})), json.loads(json.dumps(resume_settings(g), default=str))
    changed = sorted(k for k in {*before, *now} if before.get(k) != now.get(k))
    if not changed:
        return "another model or data"
    why = f"other grpo settings ({', '.join(f'{k}: {before.get(k)} -> {now.get(k)}' for k in changed)})"
    if set(changed) <= set(RUN_END):
        why += ("; without grpo.schedule_steps the learning-rate schedule spans the run's own steps, so a run of "
                "another length is another run (set schedule_steps to continue runs to more steps)")
    return why


def _read_step_record(record: Path) -> list[dict[str, Any]]:
    """The rows of a step record; a line cut short by a kill while it was written is left out."""
    rows = []
    for line in record.read_text().splitlines() if record.exists() else []:
        with contextlib.suppress(json.JSONDecodeError):
            rows.append(json.loads(line))
    return rows


def _record_problem(rows: list[dict[str, Any]], checkpoint: Path) -> str | None:
    """Why the step record's rows up to `checkpoint` are not the record of the steps it trained (one row per
    step 1..N, and a trainer state at step N), or None."""
    step = int(checkpoint.name.removeprefix("checkpoint-"))
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    if state.get("global_step") != step:
        return f"{checkpoint.name} holds the trainer state of step {state.get('global_step')}"
    logged = sorted(r["step"] for r in rows)
    if logged != list(range(1, step + 1)):
        missing = sorted(set(range(1, step + 1)) - set(logged))
        return (f"the step record ({STEP_RECORD}) holds {len(logged)} rows for the {step} steps of {checkpoint.name}"
                + (f", none for steps {missing[:5]}" if missing else ", some twice"))
    return None


def train_grpo(
    model_path: str,
    rows: list[dict[str, Any]],
    reward_fn: Callable[[str, str, str], float],
    g: dict[str, Any],
    seed: int,
    run_dir: Path,
    final_dir: Path,
    steps_file: Path,
    identity: dict[str, Any] | None = None,
    log=print,
    run_name: str | None = None,
    reward: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train, resuming from the newest matching checkpoint; write the final weights and steps.

    `rows` have `prompt` (the rendered model input) and `answer`; `reward_fn(completion, answer,
    prompt)` is the task's binary correctness times the reward scale, or a control's reward
    (hardex.controls; one with a `batch` method scores each step's completions together). `identity` says what else
    decides the run's content (the model's fingerprint, the scorer): checkpoints are resumed only
    when it, the settings, the seed and the data are all the same. `run_name` names the run in the
    tracker `g["report_to"]` asks for (hardex.tracking). With `g["processes"]` > 1 the trainer runs in
    that many processes through accelerate (hardex.launch), which rebuild the reward from `reward`
    (family, scoring, scale, the control, hardex.controls, and the reward hook's spec, hardex.reward_hook:
    hardex.train_worker).
    """

    steps_total = run_steps(g, len(rows))
    rows_per_epoch(rows, g)  # a subset too small for one step is refused before anything is written
    if why := past_horizon(g, steps_total):  # epochs over a subset only the data sizes; max_steps at planning
        raise TrainingError(f"grpo: {why}")
    ckpt_dir = run_dir / "checkpoints"
    record = ckpt_dir / STEP_RECORD
    # `auto` precision differs by machine: resolved once, here (the checkpoints hold it); the server, the
    # launcher and every training process take the resolved value. Asked without starting CUDA: a vllm-server
    # run narrows the training GPUs below, and the driver reads CUDA_VISIBLE_DEVICES once, when it starts
    precision = training_precision(g, use_cpu=not cuda_available())
    log(f"precision {precision}" + (" (auto)" if g["precision"] == "auto" else " (grpo.precision)"))
    g = {**g, "precision": precision}
    data = [(r["prompt"], r["answer"]) for r in rows]
    tag = settings_hash({"identity": identity or {"model": model_path}, "grpo": resume_settings(g), "seed": seed,
                         "data": data})
    marker = ckpt_dir / "settings.json"
    if ckpt_dir.exists() and (other := _other_run(marker, tag, g, seed, identity, settings_hash(data))):
        log(f"{ckpt_dir}: checkpoints of {other}; starting afresh")
        shutil.rmtree(ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic({"hash": tag, "grpo": g, "seed": seed, "identity": identity, "data": settings_hash(data)},
                      marker)

    done = checkpoint_steps(ckpt_dir)
    if later := [s for s in done if s > steps_total]:
        # fewer steps than were trained, under a fixed horizon (the hash holds max_steps otherwise): the steps
        # up to steps_total are this run's; the later ones go, since evaluation reads every checkpoint of a run
        log(f"the run trains {steps_total} steps, fewer than the {later[-1]} trained: checkpoints {later} removed")
        for s in later:
            shutil.rmtree(ckpt_dir / f"checkpoint-{s}")
        done = done[: len(done) - len(later)]
    while done and (damage := checkpoint_damage(ckpt_dir / f"checkpoint-{done[-1]}")):
        log(f"checkpoint-{done[-1]} is damaged ({damage}); removed, resuming from the one before")
        shutil.rmtree(ckpt_dir / f"checkpoint-{done.pop()}")
    # the step record must match the checkpoint we resume from: drop rows logged after it
    kept = [r for r in _read_step_record(record) if done and r["step"] <= done[-1]]
    if done and (problem := _record_problem(kept, ckpt_dir / f"checkpoint-{done[-1]}")):
        log(f"{problem}: its steps could not be published; checkpoints {done} removed, starting afresh")
        for s in done:
            shutil.rmtree(ckpt_dir / f"checkpoint-{s}")
        done, kept = [], []
    resume = f"{ckpt_dir}/checkpoint-{done[-1]}" if done else None
    record.write_text("".join(json.dumps(r) + "\n" for r in kept))
    t0 = time.time()
    if done and done[-1] >= steps_total:
        # Trainer.train resumed from the last step trains one step more (it checks the end only after a
        # step): a finished run publishes its last checkpoint as it is
        log(f"{resume} is the run's last step: publishing it, nothing to train")
        return _publish(Path(resume), final_dir, record, steps_file, t0, log, g["save_steps"])
    log(f"resuming from {resume} ({len(kept)} steps recorded)" if resume else "training from the base model")

    server = contextlib.nullcontext({})
    if g["rollouts"] == "vllm-server":  # a vLLM server on GPUs of the job's own (TRL's server mode)
        from hardex.vllm_server import serve_rollouts

        server = serve_rollouts(model_path, g, log)
    with server as served:
        trainer_args = {**tracker_args(g["report_to"], run_name or run_dir.name, run_dir), **served}
        if g["processes"] > 1:
            from hardex.launch import launch_training

            if reward is None:
                raise ValueError("training in several processes rebuilds the reward from `reward` (family, scoring)")
            spec = {"model_path": model_path, "rows": rows, "reward": reward, "g": g, "seed": seed,
                    "ckpt_dir": str(ckpt_dir), "resume": resume, "steps_total": steps_total,
                    "trainer_args": trainer_args}
            launch_training(spec, ckpt_dir / "launch.json", g["processes"], g["distributed"], log)
        else:
            fit(model_path, rows, reward_fn, g, seed, ckpt_dir, resume, steps_total, trainer_args)
    last = checkpoint_steps(ckpt_dir)
    if not last or last[-1] < steps_total:  # a run that stopped early must not pass for a finished one
        raise TrainingError(f"training stopped at step {last[-1] if last else 0} of {steps_total}")
    return _publish(ckpt_dir / f"checkpoint-{last[-1]}", final_dir, record, steps_file, t0, log, g["save_steps"])


def fit(model_path: str, rows: list[dict[str, Any]], reward_fn: Callable[[str, str, str], float], g: dict[str, Any],
        seed: int, ckpt_dir: Path, resume: str | None, steps_total: int, trainer_args: dict) -> None:
    """TRL's GRPOTrainer from `resume` (or the base model) to step `steps_total`, its last step a checkpoint:
    in this process, or in each of the processes accelerate started (hardex.train_worker). Only the main
    process writes the step record. `trainer_args`: GRPOConfig fields besides the grpo settings (tracker,
    vLLM server)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    use_cpu = not torch.cuda.is_available()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # refused here on a CPU, before the model loads
    quantized = quantization_config(g["quantization"], use_cpu, torch_dtype(training_precision(g, use_cpu)))
    # the GRPOConfig first: under ZeRO 3 it registers DeepSpeed's init hook (transformers'
    # is_deepspeed_zero3_enabled), so that from_pretrained loads each process's shard, not the whole model
    args = grpo_args(g, seed, ckpt_dir, use_cpu, steps_total, trainer_args)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=policy_dtype(g, use_cpu), quantization_config=quantized)
    peft_config = None
    if g["finetune"] == "lora":
        from peft import LoraConfig

        lora = g["lora"]
        check_lora_targets(model, lora["target_modules"], model_path)
        peft_config = LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                                 target_modules=lora["target_modules"], task_type="CAUSAL_LM")

    def reward(prompts, completions, answer, rollout_prompt=None, **_):
        prompts = rollout_prompt or prompts  # online filtering may have replaced a prompt of TRL's batch
        if batch := getattr(reward_fn, "batch", None):  # scores a step's completions together (a control's)
            return batch(completions, answer, prompts)
        return [reward_fn(c, a, p) for p, c, a in zip(prompts, completions, answer)]

    reward.__name__ = "correct"
    dataset = Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in rows_per_epoch(rows, g)])
    rollouts = None
    if g.get("online_filtering") and g["rollouts"] in ("trl", "vllm-server"):
        raise TrainingError("online filtering refills steps in hardex's rollout function; set grpo.rollouts to "
                            f"hardex or vllm, not {g['rollouts']}")
    if g["rollouts"] == "vllm":
        from hardex.generation.vllm_backend import require_vllm

        require_vllm()  # fail before the first step, saying how to install it
    if g["rollouts"] in ("hardex", "vllm"):
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # TRL warns that rollout_func is experimental
        rollouts = hardex_rollouts(g, seed, rows, reward_fn)
        counts = rollouts.counts
    else:  # TRL's generate, or its vLLM server: every completion of the step is trained on
        counts = trl_rollout_counts(g)
    trainer = _trainer_class()(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[_step_recorder(ckpt_dir / STEP_RECORD, counts)],
        rollout_func=rollouts,
        schedule_steps=schedule_horizon(g, steps_total),
    )
    try:
        trainer.train(resume_from_checkpoint=resume)
    except RuntimeError as e:
        if "probability tensor contains" in str(e):  # diverged weights surface first in sampling
            raise FloatingPointError(f"the policy diverged (non-finite sampling probabilities) at step "
                                     f"{trainer.state.global_step}; lower the learning rate") from e
        raise
    finally:
        if rollouts is not None:
            rollouts.close()
    if trainer.state.global_step == steps_total and steps_total not in checkpoint_steps(ckpt_dir):
        trainer._save_checkpoint(trainer.model, trial=None)  # the final step is a checkpoint too (every process)


# what a checkpoint holds to resume training (and rng_state*.pth), beside the weights, tokenizer and
# configs the final folder gets
TRAINER_STATE_FILES = ("optimizer.pt", "scheduler.pt", "trainer_state.json")


def _publish(checkpoint: Path, final_dir: Path, record: Path, steps_file: Path, t0: float, log,
             save_steps: int) -> dict[str, Any]:
    """Write the run's outputs from its last checkpoint: `final_dir` (its weights, adapter, tokenizer and
    configs) and `steps_file` (the step record); return the run's summary.

    A run continued past the step it had ended at keeps that step's checkpoint only where an uninterrupted
    run saves one too (every save_steps, and the last): its evaluation reads the same checkpoints."""
    step = int(checkpoint.name.removeprefix("checkpoint-"))
    if earlier_ends := [s for s in checkpoint_steps(checkpoint.parent) if s < step and s % save_steps]:
        log(f"checkpoints {earlier_ends} removed: earlier ends of the run, off its save_steps")
        for s in earlier_ends:
            shutil.rmtree(checkpoint.parent / f"checkpoint-{s}")
    tmp_final = final_dir.with_name(final_dir.name + ".tmp")
    shutil.rmtree(tmp_final, ignore_errors=True)
    shutil.copytree(checkpoint, tmp_final,
                    ignore=lambda _, names: [n for n in names if n in TRAINER_STATE_FILES or n.startswith("rng_state")])
    steps = pl.DataFrame(_read_step_record(record), schema=STEP_COLUMNS).unique("step", keep="last").sort("step")
    shutil.rmtree(final_dir, ignore_errors=True)
    tmp_final.rename(final_dir)
    write_parquet_atomic(steps, steps_file)
    summary = {
        "steps": step,
        "learnable_pct": learnable_pct(steps),
        "seconds": round(time.time() - t0, 1),
        "checkpoints": checkpoint_steps(checkpoint.parent),
    }
    log(summary)
    return summary
