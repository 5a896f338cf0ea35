"""One rendering and one tokenization for probing, training and evaluation.

A chat template writes the BOS itself; tokenizing its text again with special tokens (TRL's default for
text prompts, vLLM's for text requests) gives Llama 3 two BOS, so the policy trained on other tokens than
the ones it was probed and evaluated on. Every stage now feeds the model `encode_prompt(render_prompt(...))`.
"""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer, Qwen3ForCausalLM

from hardex.generation import Sampling
from hardex.generation.hf import HFGenerator
from hardex.models import encode_prompt, render_prompt


@pytest.fixture
def forward_inputs(monkeypatch):
    """input_ids of every forward call of any Qwen3 model, in call order."""
    calls = []
    forward = Qwen3ForCausalLM.forward

    def recording(self, *args, **kwargs):
        calls.append(kwargs["input_ids"].tolist() if kwargs.get("input_ids") is not None else args[0].tolist())
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(Qwen3ForCausalLM, "forward", recording)
    return calls


@pytest.fixture
def prompt(bos_chat_model):
    tok = AutoTokenizer.from_pretrained(bos_chat_model)
    text = render_prompt(tok, "Alice has a red ball. Bob has? (A) red (B) blue", chat=True)
    ids = encode_prompt(tok, text)
    assert ids.count(tok.bos_token_id) == 1 and ids[0] == tok.bos_token_id
    assert tok(text)["input_ids"][:2] == [tok.bos_token_id] * 2  # the hazard: default tokenization doubles it
    return text, ids


def test_probing_and_evaluation_feed_the_rendered_tokens(bos_chat_model, prompt, forward_inputs):
    text, ids = prompt
    gen = HFGenerator(str(bos_chat_model), progress=False)
    gen.generate([text], 2, Sampling(1.0, 1.0, 3), seed=0)
    assert forward_inputs[0] == [ids]  # the prefill: one prompt, encoded once, then expanded to its samples


@pytest.mark.parametrize("rollouts,prefill", [("hardex", 1), ("trl", 2)])
def test_training_feeds_the_rendered_tokens(tmp_path, bos_chat_model, prompt, forward_inputs, smoke_config,
                                            rollouts, prefill):
    """Both rollout samplers: hardex's generator (one prefill per distinct prompt) and TRL's generate (one
    row per completion)."""
    import copy

    from hardex.config import check_config
    from hardex.training import train_grpo

    text, ids = prompt
    g = check_config(copy.deepcopy(smoke_config))["grpo"]
    g.update(max_steps=1, save_steps=1, num_generations=2, prompts_per_step=1, max_completion_length=3,
             rollouts=rollouts)
    train_grpo(str(bos_chat_model), [{"prompt": text, "answer": "(A)"}], lambda c, a, p: 0.0, g, 0, tmp_path,
               tmp_path / "final", tmp_path / "steps.parquet", log=lambda *a: None)
    assert forward_inputs[0] == [ids] * prefill  # the first forward: the rollouts' prefill
