"""The bfloat16 path on a CPU: what `auto` picks, and that it judges as float32 does.

`models.<name>.dtype: auto` and `grpo.precision: auto` take bfloat16 on a CPU that multiplies it in hardware
(AVX512-BF16 or AMX) and float32 elsewhere; a pinned value is kept. Probing in bfloat16 must give the pass
rates float32 gives on the same prompts, within sampling noise: the speed must not buy another answer.
"""

from __future__ import annotations

import numpy as np
import pytest

from hardex.generation import Sampling
from hardex.generation.hf import HFGenerator, pick_dtype
from hardex.precision import training_precision
from hardex.training import grpo_args


@pytest.mark.parametrize("hardware, expected", [("1", "bfloat16"), ("0", "float32")])
def test_auto_takes_bfloat16_where_the_cpu_has_it_and_a_pinned_dtype_stays(monkeypatch, tmp_path, hardware, expected):
    import torch

    monkeypatch.setenv("HARDEX_CPU_BFLOAT16", hardware)
    assert pick_dtype("auto", "cpu") == getattr(torch, expected)
    assert pick_dtype("float32", "cpu") == torch.float32 and pick_dtype("bfloat16", "cpu") == torch.bfloat16
    auto = training_precision({"precision": "auto"}, use_cpu=True)
    assert auto == {"bfloat16": "bf16", "float32": "fp32"}[expected]
    assert training_precision({"precision": "fp32"}, use_cpu=True) == "fp32"
    assert training_precision({"precision": "auto"}, use_cpu=False) == "bf16"  # a GPU
    # what TRL's trainer is given: bf16 autocast on the CPU, or none
    import yaml

    from hardex.config import check_config
    from hardex.settings import grpo_settings
    from tests.support import SMOKE

    g = grpo_settings(check_config(yaml.safe_load(SMOKE.read_text())), "tiny")
    args = grpo_args({**g, "precision": "auto"}, 0, tmp_path, use_cpu=True, steps=2)
    assert args.bf16 == (hardware == "1") and not args.fp16
    assert not grpo_args({**g, "precision": "fp32"}, 0, tmp_path, use_cpu=True, steps=2).bf16


def test_bfloat16_probing_judges_as_float32_does(answering_model, one_torch_thread):
    """The same prompts, samples and scorer in float32 and bfloat16: the pass rates agree within their noise
    (a paired difference over examples), on a model whose pass rates spread between 0 and 1."""
    import torch

    from hardex.models import render_prompt
    from hardex.tasks import get_task

    task = get_task("swaps")
    pool = task.load_split({"name": "pool", "n": 32, "seed": 3, "difficulty": [0, 2]})
    rows = list(pool.iter_rows(named=True))
    prompts = [render_prompt(None, task.prompt(r), False) for r in rows]
    keys = [r["id"] for r in rows]
    rates = {}
    for dtype in ("float32", "bfloat16"):
        gen = HFGenerator(str(answering_model), device="cpu", dtype=dtype, progress=False)
        assert next(gen.model.parameters()).dtype == getattr(torch, dtype)
        samples = gen.generate(prompts, 16, Sampling(1.0, 1.0, 16), seed=0, keys=keys)
        rates[dtype] = np.array([np.mean([task.is_correct(c, r["answer"]) for c in cs])
                                 for cs, r in zip(samples, rows)])
    f32, bf16 = rates["float32"], rates["bfloat16"]
    assert 0.1 < f32.mean() < 0.9 and f32.std() > 0.05, f32  # a spread to judge, not all right or all wrong
    diff = bf16 - f32
    se = diff.std(ddof=1) / np.sqrt(len(diff))
    assert abs(diff.mean()) <= max(3 * se, 0.02), (f32.mean(), bf16.mean(), se)


def test_the_bfloat16_step_computes_the_loss_and_gradients_of_the_float32_step(tiny_model, monkeypatch,
                                                                               one_torch_thread):
    """One GRPO batch through the policy as the trainer builds it (base in policy_dtype, LoRA adapters, the
    trainer's autocast), in fp32 and in bf16: the token-level GRPO loss and its gradients agree (loss within
    2 %, gradient direction cosine > 0.99, norm within 5 %)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.trainer.utils import selective_log_softmax

    from hardex.precision import policy_dtype

    monkeypatch.setenv("HARDEX_CPU_BFLOAT16", "1")
    tok = AutoTokenizer.from_pretrained(tiny_model)
    texts = [f"Alice:red Bob:blue Claire:green. Swaps: Alice-Bob. Bob has? \\boxed{{({c})}}" for c in "ABCABCAB"]
    ids = tok(texts, return_tensors="pt", padding=True).input_ids
    mask = (ids != tok.pad_token_id).float()[:, 1:]
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.0, -1.0, 0.5, -0.5])

    def loss_and_grads(precision: str):
        g = {"precision": precision, "finetune": "lora"}
        model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=policy_dtype(g, use_cpu=True))
        torch.manual_seed(0)
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear",
                                                 task_type="CAUSAL_LM"))
        for name, p in model.named_parameters():  # B starts at zero: give it weights so that A's gradients flow too
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.05)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = model(ids).logits[:, :-1]
        logp = selective_log_softmax(logits.float(), ids[:, 1:])
        loss = -((advantages[:, None] * logp * mask).sum() / mask.sum())
        loss.backward()
        grads = torch.cat([p.grad.flatten().float() for p in model.parameters() if p.requires_grad])
        return float(loss), grads, {str(p.dtype) for p in model.parameters() if not p.requires_grad}

    loss32, grad32, frozen32 = loss_and_grads("fp32")
    loss16, grad16, frozen16 = loss_and_grads("bf16")
    assert frozen32 == {"torch.float32"} and frozen16 == {"torch.bfloat16"}  # the fast path ran in bfloat16
    assert abs(loss16 - loss32) <= 0.02 * abs(loss32), (loss32, loss16)
    cosine = float(torch.nn.functional.cosine_similarity(grad32, grad16, dim=0))
    assert cosine > 0.99 and abs(grad16.norm() / grad32.norm() - 1) < 0.05, (cosine, grad16.norm(), grad32.norm())
