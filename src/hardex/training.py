"""GRPO training of one model on one subset with TRL's GRPOTrainer (LoRA through PEFT, or full): `train_grpo`, the
train job's entry point, and `fit`, TRL's trainer set up from the config in this process or in each of several.

Every hyperparameter comes from the config's `grpo` section; TRL's `beta` and `loss_type` are
always set explicitly (their defaults changed between TRL versions). Which checkpoints a run resumes from, its
step record and its published outputs are hardex.checkpoints'; the rollouts hardex samples itself,
hardex.rollouts'.

A run fails loudly rather than finish with fewer steps than asked: a subset smaller than one
step is refused (or repeated, when the config says so), and a run that ends early is an error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import time
from pathlib import Path
from typing import Any, Callable

import polars as pl

from hardex import vllm_server
from hardex.checkpoints import STEP_RECORD, publish, resume_point, step_recorder
from hardex.devices import cuda_available
from hardex.generation.vllm_backend import require_vllm
from hardex.io import checkpoint_steps
from hardex.launch import launch_training
from hardex.models import encode_prompt
from hardex.precision import policy_dtype, torch_dtype, training_precision
from hardex.quantization import quantization_config
from hardex.rollouts import HardexRollouts, rollout_generator
from hardex.schedule import completions_per_step, past_horizon, run_steps, schedule_horizon
from hardex.shared_prefix import shared_prompt_logps
from hardex.time_limit import TimeLimit, pace_guard
from hardex.tracking import tracker_args


class TrainingError(RuntimeError):
    """A run that cannot train as configured; str() says why and what to change."""


def rows_per_epoch(rows: list[dict[str, Any]], grpo: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows TRL's sampler draws steps from, checked against what one step needs.

    TRL drops a last batch smaller than `prompts_per_step`: a subset smaller than one step would
    make no step at all and the job would "finish". That is refused, unless
    `grpo.repeat_small_subsets` asks for the subset to be repeated until a step is full (paper 1's
    text trains 32 prompts per step on 12-example subsets).
    """
    n, per_step = len(rows), grpo["prompts_per_step"]
    if n >= per_step:
        return rows
    if not grpo["repeat_small_subsets"]:
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


@functools.cache  # one class a process: perf/grpo_step.py times its methods
def _trainer_class():
    import torch
    from trl import GRPOTrainer

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
        (hardex.schedule); each epoch's order the same whether the run was resumed or not; and each distinct
        prompt's forward pass computed once for its completions' log-probabilities (hardex.shared_prefix)."""

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

        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                               batch_size=None, compute_entropy=False, compute_aux_loss=False,
                                               **inputs):
            # each distinct prompt's forward pass once (hardex.shared_prefix), where it applies
            shared = None
            if (not compute_aux_loss and not self.args.gradient_checkpointing and self.accelerator.num_processes == 1
                    and all(v is None for v in inputs.values())):
                step, chunks = batch_size or input_ids.size(0), []
                for i in range(0, input_ids.size(0), step):  # TRL's chunks (its memory bound)
                    chunks.append(shared_prompt_logps(model, input_ids[i : i + step], attention_mask[i : i + step],
                                                      logits_to_keep, compute_entropy, self.accelerator.autocast,
                                                      model.config.get_text_config()))
                    if chunks[-1] is None:  # no prompt repeats: TRL's own pass
                        break
                else:
                    shared = (torch.cat([c[0] for c in chunks]),
                              torch.cat([c[1] for c in chunks]) if compute_entropy else None, None)
            return shared or super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                **inputs)

        def create_scheduler(self, num_training_steps: int, optimizer=None):
            return super().create_scheduler(self.schedule_steps or num_training_steps, optimizer)

    return Trainer


# grpo settings that GRPOConfig takes under the same name
SAME_NAME_IN_TRL = ("gradient_accumulation_steps", "num_generations", "learning_rate", "weight_decay", "adam_beta1",
                    "adam_beta2", "max_grad_norm", "max_completion_length", "temperature", "top_p", "beta", "loss_type",
                    "scale_rewards", "epsilon", "gradient_checkpointing", "save_steps")


def grpo_args(grpo: dict[str, Any], seed: int, out: Path, use_cpu: bool, steps: int, extra: dict | None = None):
    """The GRPOConfig for the config's grpo settings and a run of `steps` steps: every field explicit.
    `extra`: the tracker's arguments (hardex.tracking) and a vLLM server's (hardex.vllm_server); no tracker
    by default."""
    from trl import GRPOConfig

    precision = training_precision(grpo, use_cpu)
    return GRPOConfig(
        output_dir=str(out),
        max_steps=steps,
        # one optimizer step = prompts_per_step x num_generations completions, generated together
        # (TRL's steps_per_generation defaults to the accumulation) and back-propagated in micro-batches
        # in several processes (grpo.processes) each takes its share: the same global batch, the same steps
        per_device_train_batch_size=(completions_per_step(grpo)
                                     // (grpo["gradient_accumulation_steps"] * grpo["processes"])),
        **{key: grpo[key] for key in SAME_NAME_IN_TRL},
        lr_scheduler_type=grpo["lr_scheduler"],
        warmup_steps=math.ceil(grpo["warmup_ratio"] * schedule_horizon(grpo, steps)),  # the schedule's, as its decay
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


def trl_rollout_counts(grpo: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """The step counts of TRL's own rollouts (its generate, or its vLLM server), which train on every completion
    of a step: each process counts its share of the step's prompts_per_step x num_generations completions (its
    slice of the batch), so that their sum over the processes (hardex.checkpoints.summed_over_processes) is the
    step's."""
    import torch.distributed as dist

    per_step = completions_per_step(grpo)

    def counts() -> dict[str, Any]:
        processes = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        return {"rollouts_generated": per_step // processes, "rollouts_discarded": 0}  # config: it divides

    return counts


def train_grpo(
    model_path: str,
    rows: list[dict[str, Any]],
    reward,
    grpo: dict[str, Any],
    seed: int,
    run_dir: Path,
    final_dir: Path,
    steps_file: Path,
    identity: dict[str, Any] | None = None,
    log=print,
    run_name: str | None = None,
    time_limit: TimeLimit | None = None,
) -> dict[str, Any]:
    """Train, resuming from the newest matching checkpoint (hardex.checkpoints); write the final weights and steps.

    `rows` have `prompt` (the rendered model input) and `answer`. `reward` is the run's reward as data, a
    hardex.controls.RewardSpec (the task's scorer or reward hook times the reward scale, or a control's reward),
    built into its function here and, with `grpo["processes"]` > 1, in each of the processes accelerate runs the
    trainer in (hardex.launch, hardex.train_worker); or, in one process only, a function `reward(completion,
    answer, prompt)` (one with a `batch` method scores each step's completions together). `identity` says what
    else decides the run's content (the model's fingerprint, the scorer): checkpoints are resumed only when it,
    the settings, the seed and the data are all the same. `run_name` names the run in the tracker
    `grpo["report_to"]` asks for (hardex.tracking). `time_limit`: the job's runtime limit, which its first steps
    are held to (hardex.time_limit).
    """
    if callable(reward) and grpo["processes"] > 1:
        raise ValueError("training in several processes (grpo.processes) hands each the reward as data: a "
                         "hardex.controls.RewardSpec, not a function")
    # built here in any case: a reward that cannot be built (a reward hook) stops the job before anything is written
    reward_fn = reward if callable(reward) else reward.function(seed)
    steps_total = run_steps(grpo, len(rows))
    rows_per_epoch(rows, grpo)  # a subset too small for one step is refused before anything is written
    if why := past_horizon(grpo, steps_total):  # epochs over a subset only the data sizes; max_steps at planning
        raise TrainingError(f"grpo: {why}")
    ckpt_dir = run_dir / "checkpoints"
    # `auto` precision differs by machine: resolved once, here (the checkpoints hold it); the server, the
    # launcher and every training process take the resolved value. Asked without starting CUDA: a vllm-server
    # run narrows the training GPUs below, and the driver reads CUDA_VISIBLE_DEVICES once, when it starts
    precision = training_precision(grpo, use_cpu=not cuda_available())
    log(f"precision {precision}" + (" (auto)" if grpo["precision"] == "auto" else " (grpo.precision)"))
    grpo = {**grpo, "precision": precision}
    data = [(r["prompt"], r["answer"]) for r in rows]
    step, recorded = resume_point(ckpt_dir, model_path, data, grpo, seed, identity, steps_total, log)
    resume = f"{ckpt_dir}/checkpoint-{step}" if step is not None else None
    t0 = time.time()
    if step is not None and step >= steps_total:
        # Trainer.train resumed from the last step trains one step more (it checks the end only after a
        # step): a finished run publishes its last checkpoint as it is
        log(f"{resume} is the run's last step: publishing it, nothing to train")
        return publish(Path(resume), final_dir, steps_file, t0, log, grpo["save_steps"])
    log(f"resuming from {resume} ({recorded} steps recorded)" if resume else "training from the base model")

    server = contextlib.nullcontext({})
    if grpo["rollouts"] == "vllm-server":  # a vLLM server on GPUs of the job's own (TRL's server mode)
        server = vllm_server.serve_rollouts(model_path, grpo, log)
    with server as served:
        trainer_args = {**tracker_args(grpo["report_to"], run_name or run_dir.name, run_dir), **served}
        if grpo["processes"] > 1:
            spec = {"model_path": model_path, "rows": rows, "reward": dataclasses.asdict(reward), "grpo": grpo,
                    "seed": seed, "ckpt_dir": str(ckpt_dir), "resume": resume, "steps_total": steps_total,
                    "trainer_args": trainer_args,
                    "time_limit": dataclasses.asdict(time_limit) if time_limit else None}
            launch_training(spec, ckpt_dir / "launch.json", grpo["processes"], grpo["distributed"], log)
        else:
            fit(model_path, rows, reward_fn, grpo, seed, ckpt_dir, resume, steps_total, trainer_args, time_limit, log)
    last = checkpoint_steps(ckpt_dir)
    if not last or last[-1] < steps_total:  # a run that stopped early must not pass for a finished one
        raise TrainingError(f"training stopped at step {last[-1] if last else 0} of {steps_total}")
    return publish(ckpt_dir / f"checkpoint-{last[-1]}", final_dir, steps_file, t0, log, grpo["save_steps"])


def fit(model_path: str, rows: list[dict[str, Any]], reward_fn: Callable[[str, str, str], float], grpo: dict[str, Any],
        seed: int, ckpt_dir: Path, resume: str | None, steps_total: int, trainer_args: dict,
        time_limit: TimeLimit | None = None, log=print) -> None:
    """TRL's GRPOTrainer from `resume` (or the base model) to step `steps_total`, its last step a checkpoint:
    in this process, or in each of the processes accelerate started (hardex.train_worker). Only the main
    process writes the step record. `trainer_args`: GRPOConfig fields besides the grpo settings (tracker,
    vLLM server); `time_limit`: the job's, which its first steps are held to (hardex.time_limit)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    use_cpu = not torch.cuda.is_available()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # refused here on a CPU, before the model loads
    quantized = quantization_config(grpo["quantization"], use_cpu, torch_dtype(training_precision(grpo, use_cpu)))
    # the GRPOConfig first: under ZeRO 3 it registers DeepSpeed's init hook (transformers'
    # is_deepspeed_zero3_enabled), so that from_pretrained loads each process's shard, not the whole model
    args = grpo_args(grpo, seed, ckpt_dir, use_cpu, steps_total, trainer_args)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=policy_dtype(grpo, use_cpu),
                                                 quantization_config=quantized)
    peft_config = None
    if grpo["finetune"] == "lora":
        from peft import LoraConfig

        lora = grpo["lora"]
        check_lora_targets(model, lora["target_modules"], model_path)
        peft_config = LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                                 target_modules=lora["target_modules"], task_type="CAUSAL_LM")

    def reward(prompts, completions, answer, rollout_prompt=None, **_):
        prompts = rollout_prompt or prompts  # online filtering may have replaced a prompt of TRL's batch
        if batch := getattr(reward_fn, "batch", None):  # scores a step's completions together (a control's)
            return batch(completions, answer, prompts)
        return [reward_fn(c, a, p) for p, c, a in zip(prompts, completions, answer)]

    reward.__name__ = "correct"
    dataset = Dataset.from_list([{"prompt": r["prompt"], "answer": r["answer"]} for r in rows_per_epoch(rows, grpo)])
    rollouts = None
    if grpo.get("online_filtering") and grpo["rollouts"] in ("trl", "vllm-server"):
        raise TrainingError("online filtering refills steps in hardex's rollout function; set grpo.rollouts to "
                            f"hardex or vllm, not {grpo['rollouts']}")
    if grpo["rollouts"] == "vllm":
        require_vllm()  # fail before the first step, saying how to install it
    if grpo["rollouts"] in ("hardex", "vllm"):
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # TRL warns that rollout_func is experimental
        rollouts = HardexRollouts(grpo, seed, rollout_generator(grpo, seed), rows, reward_fn)
        counts = rollouts.counts
    else:  # TRL's generate, or its vLLM server: every completion of the step is trained on
        counts = trl_rollout_counts(grpo)
    trainer = _trainer_class()(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[step_recorder(ckpt_dir / STEP_RECORD, counts)]
        + ([pace_guard(time_limit, steps_total, log)] if time_limit else []),
        rollout_func=rollouts,
        schedule_steps=schedule_horizon(grpo, steps_total),
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

