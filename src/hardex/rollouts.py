"""hardex's own rollouts for TRL's GRPOTrainer (`grpo.rollouts: hardex` or `vllm`): each step's completions sampled
from the weights being trained with hardex's generator, drawn as an uninterrupted run draws them, and online
filtering (DAPO's dynamic sampling) refilling a step with groups whose rewards differ."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hardex.generation.hf import HFGenerator
from hardex.generation.sampling import Sampling
from hardex.generation.vllm_backend import VLLMGenerator
from hardex.io import settings_hash
from hardex.models import encode_prompt
from hardex.precision import DTYPE_NAMES, training_precision


class HardexRollouts:
    """A TRL rollout function that samples the weights being trained with hardex's own generator: the
    transformers backend probing and evaluation use (`grpo.rollouts: hardex`; one prefill per prompt,
    finished rows leave the batch), or a vLLM engine in this process whose weights are replaced by the
    policy's before each step (`grpo.rollouts: vllm`; engine settings from `generation.vllm`).
    `open_generator(model, tokenizer)` opens that generator at the first step (`rollout_generator`).

    TRL hands over each prompt num_generations times in a row; each distinct prompt is encoded once
    and sampled num_generations times. Sample streams are keyed by (run seed, step, round, position),
    so a resumed run draws what an uninterrupted one would.

    With `grpo["online_filtering"]` (DAPO's dynamic sampling), a step scores its groups with `reward_fn`,
    drops those whose rewards all agree, and generates groups for further prompts drawn from `rows`
    (seeded by step and round) until it holds prompts_per_step mixed groups or has used
    `online_max_rounds` extra rounds; then it trains on what it has, its free slots filled with
    agreeing groups (no gradient), and marks the step as capped. The prompts and answers TRL scores are
    the ones returned (extra fields `answer` and `rollout_prompt`). `counts()` gives the last
    step's rollouts generated and discarded, tokens generated and whether the cap was reached.
    """

    def __init__(self, grpo: dict[str, Any], seed: int, open_generator: Callable[[Any, Any], Any],
                 rows: list[dict[str, Any]] | None = None, reward_fn: Callable[[str, str, str], float] | None = None):
        self.grpo, self.seed, self.open_generator = grpo, seed, open_generator
        self.sampling = Sampling(grpo["temperature"], grpo["top_p"], grpo["max_completion_length"])
        self.vllm = grpo["rollouts"] == "vllm"
        self.online = bool(grpo.get("online_filtering"))
        if self.online and (not rows or reward_fn is None):
            raise ValueError("online filtering needs the run's rows and its reward to refill a step")
        self.rows, self.reward_fn = rows, reward_fn
        self.answer_of = {r["prompt"]: r["answer"] for r in rows or []}
        self.generator = None  # opened at the first step, when the policy and its tokenizer exist
        self.last_counts: dict[str, Any] = {}

    def counts(self) -> dict[str, Any]:
        """The last step's rollouts generated and discarded, tokens generated and whether the cap was reached."""
        return self.last_counts

    def __call__(self, prompts: list[str], trainer) -> dict[str, list]:
        group_size = trainer.num_generations
        groups = [prompts[i : i + group_size] for i in range(0, len(prompts), group_size)]
        if len(prompts) % group_size or any(len(set(group)) != 1 for group in groups):
            raise ValueError(f"expected each prompt {group_size} times in a row (TRL's sampler), "
                             f"got {len(prompts)} prompts")
        model = trainer.accelerator.unwrap_model(trainer.model)
        training = model.training  # read first: the transformers generator puts the model in eval mode
        if self.generator is None:
            self.generator = self.open_generator(model, trainer.processing_class)
        if self.vllm:
            self.generator.load_weights(policy_weights(model))
        step = trainer.state.global_step
        step_seed = int(settings_hash({"seed": self.seed, "step": step}), 16) % 2**31
        tokenizer = trainer.processing_class

        first = trainer.accelerator.process_index * len(groups)  # this process's place in the step's groups

        def sample(distinct: list[str], round_: int) -> list[list[list[int]]]:
            keys = [str(first + j) if round_ == 0 else f"r{round_}-{first + j}" for j in range(len(distinct))]
            return self.generator.generate_ids(distinct, group_size, self.sampling, seed=step_seed, desc="rollouts",
                                               keys=keys)

        distinct = [group[0] for group in groups]
        model.eval()  # in training mode, gradient checkpointing switches the KV cache off
        # (on a CPU the transformers generator samples a LoRA policy with its adapters merged: lean_step)
        try:
            completions = sample(distinct, 0)
            generated = [c for group in completions for c in group]
            capped = None
            if self.online:
                trained, capped, extra = self._refill(
                    [(p, self.answer_of[p], c) for p, c in zip(distinct, completions)], sample, step, tokenizer)
                generated += extra
                distinct, answers, completions = (list(t) for t in zip(*trained))
        finally:
            model.train(training)
        ids = [c for group in completions for c in group]
        self.last_counts = {"rollouts_generated": len(generated), "rollouts_discarded": len(generated) - len(ids),
                            "tokens_generated": sum(len(c) for c in generated), "filter_capped": capped}
        out = {"prompt_ids": [encode_prompt(tokenizer, p) for p in distinct for _ in range(group_size)],
               "completion_ids": ids,
               "logprobs": [[0.0] * len(c) for c in ids]}  # read by TRL only for vLLM's importance sampling
        if self.online:  # TRL scores what was returned: the refilled prompts with their own answers
            out["answer"] = [a for a in answers for _ in range(group_size)]
            out["rollout_prompt"] = [p for p in distinct for _ in range(group_size)]
        return out

    def _refill(self, groups: list[tuple[str, str, list]], sample, step: int, tokenizer) -> tuple[list, bool, list]:
        """Online filtering of one step's (prompt, answer, completions) groups: the groups it trains
        on, whether it reached the cap, and the completions of the extra rounds it generated."""
        def agrees(prompt, answer, group) -> bool:
            texts = tokenizer.batch_decode(group, skip_special_tokens=True)
            return len({self.reward_fn(t, answer, prompt) for t in texts}) == 1

        rows = self.rows
        kept, dropped = [], []
        for grp in groups:
            (dropped if agrees(*grp) else kept).append(grp)
        extra, round_ = [], 0
        while len(kept) < len(groups) and round_ < self.grpo["online_max_rounds"]:
            round_ += 1
            rng = np.random.default_rng([self.seed, step, round_])
            drawn = [rows[int(i)] for i in rng.choice(len(rows), min(len(groups), len(rows)), replace=False)]
            more = sample([r["prompt"] for r in drawn], round_)
            extra += [c for group in more for c in group]
            for r, group in zip(drawn, more):
                grp = (r["prompt"], r["answer"], group)
                (dropped if agrees(*grp) else kept).append(grp)
        capped = len(kept) < len(groups)
        return (kept + dropped)[: len(groups)], capped, extra  # at the cap, agreeing groups fill the free slots

    def close(self) -> None:
        """Stop a vLLM engine (its KV cache holds a share of the machine's memory)."""
        generator, self.generator = self.generator, None
        if self.vllm and generator is not None:
            generator.close()


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


def rollout_generator(grpo: dict[str, Any], seed: int, token_budget: int = 262144) -> Callable[[Any, Any], Any]:
    """How hardex's rollouts (hardex.rollouts) open their generator at their first step, given the policy and its
    tokenizer: an in-process vLLM engine (`grpo.rollouts: vllm`; engine settings from `generation.vllm`), or the
    transformers generator over the policy's own weights, its batches under `token_budget` padded tokens
    (hardex.model_shape.ROLLOUT_TOKEN_BUDGET plans with it)."""

    def open_generator(model, tokenizer):
        if grpo["rollouts"] == "vllm":
            # the engine samples in the precision the policy computes in (its weights may be float32 master copies)
            dtype = DTYPE_NAMES[training_precision(grpo, use_cpu=next(model.parameters()).device.type == "cpu")]
            return VLLMGenerator(str(model.name_or_path), dtype=dtype, seed=seed, progress=False, in_process=True,
                                 tokenizer=tokenizer, **grpo["vllm"])
        # it samples the weights as they are (float32 under full fine-tuning, as on a CPU): their dtype sizes the
        # KV cache its token budget is checked against
        dtype = str(next(p.dtype for p in model.parameters() if p.is_floating_point())).removeprefix("torch.")
        return HFGenerator(str(model.name_or_path), model=model, tokenizer=tokenizer, dtype=dtype,
                           token_budget=token_budget, progress=False, decode=grpo.get("decode", "auto"))

    return open_generator
