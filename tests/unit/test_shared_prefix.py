"""Each distinct prompt's forward pass once for its completions' log-probabilities (hardex.shared_prefix), against
TRL's own pass over prompt and completion together: the same log-probabilities, entropies and gradients, on a
transformers Qwen3 with TRL's fused head; and hardex's trainer takes that path in a GRPO run."""

from __future__ import annotations

from contextlib import nullcontext

import pytest

from hardex.shared_prefix import shared_prompt_logps


def fused_model(temperature: float):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                         attn_implementation="sdpa"))
    add_fused_lm_head(model, temperature=temperature, outputs=("log_probs", "entropy"))
    return model


def grpo_batch(groups: int = 3, group_size: int = 4, width: int = 9, completion: int = 6, seed: int = 1):
    """Rows of `groups` prompts (left padded to `width`, of different lengths) x `group_size` completions (some
    ending early: right padded, mask 0), shuffled as TRL shuffles a generation batch."""
    import torch

    g = torch.Generator().manual_seed(seed)
    ids, mask = [], []
    for p in range(groups):
        length = width - 2 * p
        prompt = torch.randint(1, 97, (length,), generator=g)
        for _ in range(group_size):
            done = int(torch.randint(2, completion + 1, (1,), generator=g))
            comp = torch.randint(1, 97, (completion,), generator=g)
            ids.append(torch.cat([torch.zeros(width - length, dtype=torch.long), prompt, comp]))
            mask.append(torch.cat([torch.zeros(width - length), torch.ones(length), torch.ones(done),
                                   torch.zeros(completion - done)]).long())
    order = torch.randperm(len(ids), generator=g)
    return torch.stack(ids)[order], torch.stack(mask)[order]


def trl_logps(model, ids, mask, keep: int):
    """TRL 1.16's GRPOTrainer._get_per_token_logps_and_entropies, one chunk: the whole sequence at once."""
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-keep] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -keep:], out.entropy[:, -keep:]


@pytest.fixture
def any_saving(monkeypatch):
    """The shared pass taken whatever it saves: these models are far below MIN_SAVED_FLOPS."""
    from hardex import shared_prefix

    monkeypatch.setattr(shared_prefix, "MIN_SAVED_FLOPS", 0)


@pytest.mark.parametrize("call_cost", [None, 0], ids=["one-group", "a-group-per-length"])
def test_one_pass_per_prompt_gives_trls_log_probabilities_entropies_and_gradients(any_saving, call_cost, monkeypatch):
    """Also with the completions run in groups cut to their longest (call_cost 0: a group per length here)."""
    from hardex import shared_prefix

    monkeypatch.setattr(shared_prefix, "CALL_COST_TOKENS", shared_prefix.CALL_COST_TOKENS if call_cost is None else 0)
    model = fused_model(temperature=0.7)
    ids, mask = grpo_batch()
    keep = 6
    scored = mask[:, -keep:].bool()

    def loss_and_grads(logps):
        model.zero_grad()
        (logps * scored).sum().backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    ref_logps, ref_entropy = trl_logps(model, ids, mask, keep)
    ref_grads = loss_and_grads(ref_logps)
    logps, entropy = shared_prompt_logps(model, ids, mask, keep, True, nullcontext, model.config)
    grads = loss_and_grads(logps)

    assert logps.shape == ref_logps.shape == (12, keep)
    assert ((logps - ref_logps).abs()[scored] < 1e-5).all()
    assert ((entropy - ref_entropy).abs()[scored] < 1e-5).all()
    assert (logps[~scored] == 0).all()  # padding scores nothing, as in TRL's pass
    for name, g in ref_grads.items():
        assert g.abs().max() > 0, name
        assert (grads[name] - g).abs().max() <= 1e-4 * g.abs().max() + 1e-6, name


def test_completions_run_cut_to_their_groups_longest(any_saving, monkeypatch):
    """A batch of short completions and two clipped ones: the model computes the short ones' positions only, not
    the padding to the clipped ones' length, and the log-probabilities are those of one uncut pass."""
    import torch

    from hardex import shared_prefix

    model = fused_model(temperature=1.0)
    ids, mask = grpo_batch(groups=2, group_size=8, completion=24)
    keep = 24
    mask[:, -keep:] = 0
    mask[:, -keep : -keep + 3] = 1  # every completion 3 tokens ...
    mask[[0, 9], -keep:] = 1  # ... but two, clipped at 24
    positions = []
    model.model.register_forward_pre_hook(lambda m, a, kw: positions.append(kw["input_ids"].numel()),
                                          with_kwargs=True)
    grouped, _ = shared_prompt_logps(model, ids, mask, keep, False, nullcontext, model.config)
    prompt_pass = positions.pop(0)
    assert prompt_pass == 2 * (ids.shape[1] - keep - 1)
    assert sorted(positions) == [14 * 3, 2 * 24]  # two groups: 90 positions, not 16 x 24 = 384
    monkeypatch.setattr(shared_prefix, "length_groups", lambda lengths: [list(range(len(lengths)))])
    uncut, _ = shared_prompt_logps(model, ids, mask, keep, False, nullcontext, model.config)
    scored = mask[:, -keep:].bool()
    assert torch.allclose(grouped[scored], uncut[scored], atol=1e-5)
    assert (grouped[~scored] == 0).all()


def test_length_groups_computes_the_fewest_positions():
    """The grouping is the cheapest of all contiguous groupings of the rows sorted by length (brute force), every
    row in exactly one group; equal lengths stay one call."""
    import itertools
    import random

    from hardex.shared_prefix import length_groups

    assert length_groups([7] * 10, call_cost=0) == [list(range(10))]
    rng = random.Random(0)
    for _ in range(30):
        lengths = [rng.choice([1, 2, 5, 9, 30, 48]) for _ in range(rng.randint(1, 8))]
        cost = rng.choice([0, 4, 64])

        def price(groups):
            return sum(len(g) * max(lengths[i] for i in g) + cost for g in groups)

        groups = length_groups(lengths, call_cost=cost)
        assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        best = min(price([order[a:b] for a, b in zip((0, *cuts), (*cuts, len(order)))])
                   for k in range(len(order)) for cuts in itertools.combinations(range(1, len(order)), k))
        assert price(groups) == best


def test_a_batch_whose_prompts_all_differ_is_left_to_trl(any_saving):
    model = fused_model(temperature=1.0)
    ids, mask = grpo_batch(groups=4, group_size=1)
    assert shared_prompt_logps(model, ids, mask, 6, False, nullcontext, model.config) is None


def test_a_model_too_small_to_repay_a_second_pass_is_left_to_trl():
    """A tiny model's saved prompt tokens do not pay for the second forward call: TRL's pass."""
    model = fused_model(temperature=1.0)
    ids, mask = grpo_batch()
    assert shared_prompt_logps(model, ids, mask, 6, False, nullcontext, model.config) is None


def test_the_trainer_scores_its_groups_with_one_pass_per_prompt(tmp_path, tiny_model, smoke_config, monkeypatch,
                                                                 any_saving):
    """A GRPO run through hardex's trainer (TRL's GRPOTrainer) takes the shared pass at its steps: every call
    shares (two prompts x four completions a step), and the run trains."""
    from hardex import training
    from tests.unit.test_training import tiny_grpo

    grpo = {**tiny_grpo(smoke_config, max_steps=2), "gradient_checkpointing": False}  # it turns the cache off
    calls = []

    def counted(*args, **kwargs):
        calls.append(shared_prompt_logps(*args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(training, "shared_prompt_logps", counted)
    run_dir = tmp_path / "run"
    summary = training.train_grpo(str(tiny_model), [{"prompt": f"Bob has? {i}\n", "answer": "(B)"} for i in range(6)],
                                  lambda c, a, p: float("B" in c), grpo, 0, run_dir, run_dir / "final",
                                  run_dir / "steps.parquet")
    assert calls and all(c is not None for c in calls)
    assert summary["steps"] == grpo["max_steps"]
