"""GRPO through TRL's real GRPOTrainer on the tiny built model; the per-step learning signal."""

from __future__ import annotations

import copy
import re

import polars as pl
import pytest

from hardex.config import ConfigError, check_config
from hardex.io import checkpoint_steps
from hardex.metrics import learnable_pct, pass_at_k
from hardex.training import TrainingError, check_lora_targets, train_grpo


def tiny_grpo(smoke_config: dict, max_steps: int) -> dict:
    """The smoke config's grpo settings at a few steps of two prompts x four 12-token completions."""
    g = check_config(copy.deepcopy(smoke_config))["grpo"]
    g.update(max_steps=max_steps, save_steps=2, num_generations=4, prompts_per_step=2, max_completion_length=12)
    return g


def swaps_rows(n: int) -> list[dict]:
    """n training rows of the swaps family's form (each its own prompt), all answered (B)."""
    return [{"prompt": f"Alice:red Bob:blue. Swaps: none. Bob has? {i}\n", "answer": "(B)"} for i in range(n)]


@pytest.fixture
def grpo(smoke_config) -> dict:
    return tiny_grpo(smoke_config, max_steps=4)


def rows(n=6):
    return swaps_rows(n)


def run(tmp_path, tiny_model, g, reward, name="run", n_rows=6, identity=None, log=lambda *a: None):
    run_dir = tmp_path / name
    summary = train_grpo(str(tiny_model), rows(n_rows), reward, g, 0, run_dir, run_dir / "final",
                         run_dir / "steps.parquet", identity=identity, log=log)
    return summary, pl.read_parquet(run_dir / "steps.parquet"), run_dir


def test_agreeing_rewards_have_zero_std_and_no_signal(tmp_path, tiny_model, grpo):
    summary, steps, run_dir = run(tmp_path, tiny_model, grpo, lambda c, a, p: 1.0)
    assert steps["step"].to_list() == [1, 2, 3, 4]
    assert (steps["reward_mean"] == 1.0).all() and (steps["reward_std"] == 0.0).all()
    assert (steps["frac_zero_std"] == 1.0).all()
    assert summary["learnable_pct"] == 0.0
    assert checkpoint_steps(run_dir / "checkpoints") == [2, 4]
    assert (run_dir / "final" / "config.json").exists()


def test_mixed_rewards_are_learnable(tmp_path, tiny_model, grpo):
    # reward depends on the sampled text: within a group of 4 samples it varies most of the time
    summary, steps, _ = run(tmp_path, tiny_model, grpo, lambda c, a, p: float(len(c) % 2 == 0))
    assert (steps["reward_std"] > 0).any()
    assert (steps["frac_zero_std"] < 1).any()
    assert steps["frac_zero_std"].is_between(0, 1).all()
    assert steps["completion_length"].is_between(1, grpo["max_completion_length"]).all()
    # TRL's clipped ratio: completions cut at the length limit; all of them cut only where the mean is the limit
    assert steps["frac_truncated"].null_count() == 0 and steps["frac_truncated"].is_between(0, 1).all()
    assert ((steps["frac_truncated"] < 1) | (steps["completion_length"] == grpo["max_completion_length"])).all()
    assert steps["loss"].is_finite().all() and (steps["step_time"] > 0).all()
    assert summary["learnable_pct"] == pytest.approx(100 * (1 - steps["frac_zero_std"]).mean())



def test_gradient_accumulation_makes_the_same_updates_in_smaller_batches(tmp_path, tiny_model, grpo):
    """Micro-batching is a memory setting, not a different experiment: with the same seed, two
    micro-batches per step draw the same completions and end at the same weights as one batch."""
    import torch
    from safetensors.torch import load_file

    reward = lambda c, a, p: float(len(c) % 2 == 0)  # noqa: E731 - varies within groups: real gradients
    # in float32: under bf16 autocast the two batch shapes round differently (hardex.precision.policy_dtype)
    g = {**grpo, "max_steps": 2, "save_steps": 2, "beta": 0.0, "precision": "fp32"}
    _, one_batch, d1 = run(tmp_path, tiny_model, g, reward, name="accum1")
    _, two_batches, d2 = run(tmp_path, tiny_model, {**g, "gradient_accumulation_steps": 2}, reward, name="accum2")
    assert two_batches["step"].to_list() == [1, 2]  # optimizer steps, not micro-batches
    for col in ["reward_mean", "reward_std", "frac_zero_std", "completion_length"]:
        assert two_batches[col].to_list() == pytest.approx(one_batch[col].to_list()), col
    w1, w2 = load_file(d1 / "final" / "model.safetensors"), load_file(d2 / "final" / "model.safetensors")
    base = load_file(tiny_model / "model.safetensors")
    moved = [k for k in w1 if not torch.equal(w1[k], base[k])]
    assert moved, "the runs did not train"
    for k in w1:
        torch.testing.assert_close(w2[k], w1[k], rtol=1e-4, atol=1e-6)

def test_learnable_pct_arithmetic():
    steps = pl.DataFrame({"frac_zero_std": [1.0, 0.0, 0.5, 0.25]})
    assert learnable_pct(steps) == pytest.approx(100 * (0 + 1 + 0.5 + 0.75) / 4)
    one_prompt = pl.DataFrame({"frac_zero_std": [1.0, 0.0, 0.0, 1.0, 1.0]})  # paper: share of steps with signal
    assert learnable_pct(one_prompt) == pytest.approx(40.0)


def test_checkpoints_from_other_settings_are_not_resumed(tmp_path, tiny_model, grpo):
    _, _, run_dir = run(tmp_path, tiny_model, grpo, lambda c, a, p: 1.0)
    changed = {**grpo, "learning_rate": grpo["learning_rate"] * 2, "max_steps": 2}
    summary, steps, _ = run(tmp_path, tiny_model, changed, lambda c, a, p: 1.0)
    assert summary["checkpoints"] == [2]  # the old checkpoint-4 was discarded, not mixed in
    assert steps["step"].to_list() == [1, 2]


@pytest.mark.parametrize(
    "n,c,k,expected",
    [(1, 1, 1, 1.0), (1, 0, 1, 0.0), (4, 2, 1, 0.5), (4, 1, 2, 0.5), (4, 2, 2, 5 / 6), (8, 1, 8, 1.0),
     (8, 0, 8, 0.0), (5, 3, 3, 1.0), (10, 1, 5, 0.5)],
)
def test_pass_at_k_exact(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_needs_enough_samples():
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_a_diverging_run_stops_loudly(tmp_path, tiny_model, grpo):
    g = {**grpo, "learning_rate": 1e12, "max_grad_norm": 1e12, "max_steps": 6}
    with pytest.raises(FloatingPointError, match="diverged|loss is nan|grad norm is nan"):
        run(tmp_path, tiny_model, g, lambda c, a, p: float(len(c) % 2 == 0))


def test_a_nan_loss_is_refused_by_the_step_recorder(tmp_path):
    from types import SimpleNamespace

    from hardex.checkpoints import step_recorder

    recorder = step_recorder(tmp_path / "steps.jsonl", dict)
    state = SimpleNamespace(global_step=7, is_world_process_zero=True)
    recorder.on_log(None, state, None, logs={"reward": 0.5, "loss": 0.1})
    with pytest.raises(FloatingPointError, match="loss is nan at step 7"):
        recorder.on_log(None, state, None, logs={"reward": 0.5, "loss": float("nan")})
    assert len((tmp_path / "steps.jsonl").read_text().splitlines()) == 1


def test_a_subset_smaller_than_one_step_is_refused_before_training(tmp_path, tiny_model, grpo):
    """TRL drops a batch smaller than prompts_per_step: without the check the run made no step and
    'succeeded' with checkpoint-0."""
    with pytest.raises(TrainingError, match="the subset has 3 examples, fewer than the 4 prompts one GRPO step"):
        run(tmp_path, tiny_model, {**grpo, "prompts_per_step": 4}, lambda c, a, p: 1.0, n_rows=3)
    assert checkpoint_steps(tmp_path / "run" / "checkpoints") == []


def test_a_small_subset_is_repeated_within_steps_when_the_config_says_so(tmp_path, tiny_model, grpo):
    g = {**grpo, "prompts_per_step": 4, "repeat_small_subsets": True}
    summary, steps, _ = run(tmp_path, tiny_model, g, lambda c, a, p: 1.0, n_rows=3)
    assert steps["step"].to_list() == [1, 2, 3, 4] and summary["steps"] == 4


def test_a_run_that_ends_before_its_last_step_fails(tmp_path, tiny_model, grpo, monkeypatch):
    """Whatever stops TRL early (here: the old behaviour, a subset smaller than a step), the job fails."""
    import hardex.training

    monkeypatch.setattr(hardex.training, "rows_per_epoch", lambda rows, g: rows)
    with pytest.raises(TrainingError, match="training stopped at step 0 of 4"):
        run(tmp_path, tiny_model, {**grpo, "prompts_per_step": 4}, lambda c, a, p: 1.0, n_rows=3)


def test_epochs_give_each_subset_its_own_number_of_steps(tmp_path, tiny_model, grpo):
    g = {**grpo, "epochs": 1.5, "max_steps": 1000, "save_steps": 100}
    summary, steps, run_dir = run(tmp_path, tiny_model, g, lambda c, a, p: 1.0, n_rows=6)
    assert steps["step"].to_list() == [1, 2, 3, 4, 5]  # ceil(1.5 x 6 examples / 2 prompts per step)
    assert checkpoint_steps(run_dir / "checkpoints") == [5]


def test_unmatched_lora_targets_fail_before_the_first_step(tmp_path, tiny_model, grpo):
    """PEFT trains whatever names match and says nothing of those that do not (phi-4's fused qkv_proj)."""
    g = {**grpo, "finetune": "lora", "lora": {"r": 4, "alpha": 8, "dropout": 0.0,
                                              "target_modules": ["q_proj", "v_proj", "qkv_proj"]}}
    with pytest.raises(TrainingError, match=r"\['qkv_proj'\] match no linear layer .* its linear layers are "
                                            r"down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj"):
        run(tmp_path, tiny_model, g, lambda c, a, p: 1.0)
    assert checkpoint_steps(tmp_path / "run" / "checkpoints") == []


def test_the_presets_lora_targets_fit_phi4(tmp_path):
    """phi-4 is a Phi3 model: its attention input is one fused qkv_proj and its MLP input gate_up_proj.
    The presets give it those names; the seven names of the other models would leave both untrained."""
    import yaml
    from transformers import Phi3Config, Phi3ForCausalLM

    from hardex.settings import grpo_settings
    from tests.support import ROOT

    phi3 = Phi3ForCausalLM(Phi3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2, pad_token_id=0))
    for preset in ("hard_examples_paper", "hard_examples_code"):
        cfg = check_config(yaml.safe_load((ROOT / "experiments" / f"{preset}.yaml").read_text()))
        check_lora_targets(phi3, grpo_settings(cfg, "phi4")["lora"]["target_modules"], "phi4")
        with pytest.raises(TrainingError, match=r"\['q_proj', 'k_proj', 'v_proj', 'gate_proj', 'up_proj'\] match no"):
            check_lora_targets(phi3, grpo_settings(cfg, "qwen3-4b")["lora"]["target_modules"], "phi4")


def test_checkpoints_of_another_model_are_not_resumed(tmp_path, tiny_model, grpo):
    """A rebuilt model under the same path has another fingerprint: its run starts afresh instead of
    'resuming' at the old model's last checkpoint and training nothing."""
    messages = []
    run(tmp_path, tiny_model, grpo, lambda c, a, p: 1.0, identity={"model": "weights-A"})
    summary, steps, _ = run(tmp_path, tiny_model, grpo, lambda c, a, p: 1.0, identity={"model": "weights-B"},
                            log=messages.append)
    assert any("starting afresh" in str(m) for m in messages) and "training from the base model" in messages
    assert steps["step"].to_list() == [1, 2, 3, 4]


def test_grpo_raises_a_learnable_reward_in_rollouts_and_saved_weights(tmp_path, tiny_model, grpo):
    """The trainer learns: rewarding one answer ('Bob') makes the policy give it more often within 16 steps,
    in the rollouts (sampled from the weights being trained) and in the saved weights evaluation loads.
    If the reward did not reach the loss, or rollouts or checkpoints held stale weights, nothing would rise."""
    from hardex.generation import Sampling
    from hardex.generation.hf import HFGenerator

    g = {**grpo, "max_steps": 16, "save_steps": 16, "num_generations": 8, "prompts_per_step": 4, "learning_rate": 1e-2,
         "warmup_ratio": 0.0, "lr_scheduler": "constant", "max_completion_length": 12}
    _, steps, run_dir = run(tmp_path, tiny_model, g, lambda c, a, p: float("Bob" in c), n_rows=8)
    reward = steps["reward_mean"].to_list()
    # the mean of 4 steps (128 samples) of an untrained policy moves by a few hundredths (SE about 0.025 at 0.08);
    # trained, it rose by 0.34 to 0.6 in runs of this test, the trajectory depending on the floating-point history
    # of the process (thread count, allocations): 0.2 is far above the noise and below every trained run seen
    assert sum(reward[-4:]) / 4 > sum(reward[:4]) / 4 + 0.2, reward

    gen = HFGenerator(str(tiny_model), progress=False)
    prompts = [r["prompt"] for r in rows(8)]

    def share_with_bob() -> float:
        samples = [c for cs in gen.generate(prompts, 8, Sampling(1.0, 1.0, 12), seed=1) for c in cs]
        return sum("Bob" in c for c in samples) / len(samples)

    before = share_with_bob()
    gen.use_checkpoint(run_dir / "final")
    assert share_with_bob() > before + 0.2


def test_lora_grpo_raises_a_learnable_reward_through_merged_rollouts(tmp_path, answering_model, grpo):
    """With LoRA on a CPU, hardex's rollouts sample with the adapters merged into the weights (adapters_merged):
    rewarding one boxed letter ('(C', about a fifth of the base model's samples) must raise it in the rollouts
    within 16 steps. Were the merge stale or wrong, the rollouts would not follow what is trained."""
    g = {**grpo, "max_steps": 16, "save_steps": 16, "num_generations": 8, "prompts_per_step": 4, "learning_rate": 3e-3,
         "warmup_ratio": 0.0, "lr_scheduler": "constant", "max_completion_length": 12, "finetune": "lora",
         "lora": {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj",
                                                                        "gate_proj", "up_proj", "down_proj"]}}
    _, steps, _ = run(tmp_path, answering_model, g, lambda c, a, p: float("(C" in c), n_rows=8)
    reward = steps["reward_mean"].to_list()
    assert sum(reward[-4:]) / 4 > sum(reward[:4]) / 4 + 0.15, reward


def test_a_damaged_last_checkpoint_falls_back_to_the_one_before(tmp_path, tiny_model, grpo):
    """A checkpoint cut short (a full disk, a kill during its save) once made every rerun fail in safetensors."""
    _, _, run_dir = run(tmp_path, tiny_model, grpo, lambda c, a, p: 1.0)
    weights = run_dir / "checkpoints/checkpoint-4/model.safetensors"
    with open(weights, "r+b") as fh:
        fh.truncate(weights.stat().st_size // 2)
    messages = []
    summary, steps, _ = run(tmp_path, tiny_model, grpo, lambda c, a, p: 1.0, log=messages.append)
    assert any("checkpoint-4 is damaged (SafetensorError" in str(m) for m in messages), messages
    assert any(str(m).startswith("resuming from") and str(m).split()[2].endswith("checkpoint-2") for m in messages)
    assert steps["step"].to_list() == [1, 2, 3, 4] and summary["checkpoints"] == [2, 4]


def test_policy_weights_of_a_lora_model_are_its_merged_weights(tiny_model):
    """What vLLM rollouts are given each step: the base weights plus the LoRA deltas, under the plain
    checkpoint's names, leaving the trained model unmerged."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from hardex.rollouts import policy_weights

    original = dict(AutoModelForCausalLM.from_pretrained(tiny_model).named_parameters())
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"]))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_()  # PEFT starts B at zero: make the deltas real
    weights = {n: t.clone() for n, t in policy_weights(model)}
    assert any("lora_A" in n for n, _ in model.named_parameters())  # still an unmerged PEFT model
    reference = dict(model.merge_and_unload().named_parameters())
    assert weights.keys() == reference.keys() == original.keys()
    for name, tensor in weights.items():
        torch.testing.assert_close(tensor, reference[name].detach(), rtol=1e-5, atol=1e-6)
    changed = {n.split(".")[-2] for n in weights if not torch.equal(weights[n], original[n])}
    assert changed == {"q_proj", "down_proj"}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_adapters_merged_computes_the_adapted_model_and_puts_the_base_weights_back(tiny_model, dtype):
    """What hardex's rollouts sample from on a CPU: inside the block the model computes the logits of the
    base plus its adapters through the base layers alone; after it the very base tensors are back
    (bit for bit, also in bfloat16, where subtracting the delta again would not restore them)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from hardex.generation.lean_step import adapters_merged

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model, dtype=getattr(torch, dtype)),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"]))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)  # PEFT starts B at zero: make the deltas real
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids = torch.tensor([[5, 17, 42, 9, 33, 8]])
    calls = []
    lora_a = model.get_base_model().model.layers[0].self_attn.q_proj.lora_A["default"]
    hook = lora_a.register_forward_hook(lambda *a: calls.append(1))
    with torch.no_grad():
        adapted = model(ids).logits.float()
        with adapters_merged(model):
            merged = model(ids).logits.float()
        base = model.get_base_model()
        with model.disable_adapter():
            plain = model(ids).logits.float()
    hook.remove()
    assert len(calls) == 1  # only the unmerged forward ran the adapters
    # the merged model is the adapted one up to rounding, far closer to it than the base without adapters is
    error, effect = (merged - adapted).abs().max(), (adapted - plain).abs().max()
    assert error < {"float32": 1e-4, "bfloat16": 0.1}[dtype] * effect, (error, effect)
    for name, param in model.named_parameters():
        assert torch.equal(param.detach(), before[name]), name
    assert base is model.get_base_model()


def test_online_filtering_trains_only_on_mixed_groups_and_counts_what_it_drops(tmp_path, tiny_model, grpo):
    """Half the rows are solved by any completion (their groups agree, no gradient), the other half
    are rewarded by the completion's parity (mostly mixed). Online filtering drops the agreeing groups
    and refills from the subset: every step trains on mixed groups only, and the step record counts the
    rollouts it generated and threw away."""
    solved = {r["prompt"] for i, r in enumerate(rows(8)) if i % 2 == 0}

    def reward(c, a, p):
        return 1.0 if p in solved else float(len(c) % 2 == 0)

    g = {**grpo, "online_filtering": True, "online_max_rounds": 8}
    _, steps, _ = run(tmp_path, tiny_model, g, reward, n_rows=8)
    per_step = g["prompts_per_step"] * g["num_generations"]
    assert not steps["filter_capped"].any()
    assert (steps["frac_zero_std"] == 0).all(), steps["frac_zero_std"].to_list()
    assert (steps["rollouts_generated"] - steps["rollouts_discarded"] == per_step).all()
    assert steps["rollouts_discarded"].sum() > 0 and (steps["rollouts_generated"] % per_step == 0).all()
    assert (steps["tokens_generated"] >= steps["rollouts_generated"]).all()  # at least one token each

    plain = run(tmp_path, tiny_model, grpo, reward, name="plain", n_rows=8)[1]
    assert plain["frac_zero_std"].mean() > 0.3  # without the filter, agreeing groups are trained on
    assert (plain["rollouts_discarded"] == 0).all() and (plain["rollouts_generated"] == per_step).all()
    assert plain["filter_capped"].is_null().all()


def test_online_filtering_on_an_all_solved_pool_stops_at_its_cap_and_says_so(tmp_path, tiny_model, grpo):
    g = {**grpo, "online_filtering": True, "online_max_rounds": 2}
    _, steps, _ = run(tmp_path, tiny_model, g, lambda c, a, p: 1.0)
    per_step = g["prompts_per_step"] * g["num_generations"]
    assert steps["step"].to_list() == [1, 2, 3, 4]  # trained on what it had, not looped forever
    assert steps["filter_capped"].all() and (steps["frac_zero_std"] == 1).all()
    assert (steps["rollouts_generated"] == 3 * per_step).all()  # the batch and two refill rounds
    assert (steps["rollouts_discarded"] == 2 * per_step).all()


def test_online_filtering_with_trls_generate_is_refused(tmp_path, tiny_model, grpo):
    with pytest.raises(TrainingError, match="online filtering refills steps in hardex's rollout function"):
        run(tmp_path, tiny_model, {**grpo, "online_filtering": True, "rollouts": "trl"}, lambda c, a, p: 1.0)


def test_rerunning_a_finished_run_trains_no_step_past_its_end(tmp_path, tiny_model, grpo):
    """transformers' Trainer resumed from the last step's checkpoint trains one step more (it checks the
    end after a step): a rerun of a finished run (Snakemake reruns train when its subset is rewritten)
    added step 5 and checkpoint-5 to a 4-step run. Now it publishes checkpoint-4 as it is."""
    from safetensors.torch import load_file

    g = {**grpo, "lr_scheduler": "constant", "warmup_ratio": 0.0}  # an extra step would move the weights
    bob = lambda c, a, p: float("Bob" in c)  # noqa: E731
    _, first, run_dir = run(tmp_path, tiny_model, g, bob)
    messages = []
    summary, steps, _ = run(tmp_path, tiny_model, g, bob, log=messages.append)
    assert any("nothing to train" in str(m) for m in messages), messages
    assert steps.equals(first) and steps["step"].to_list() == [1, 2, 3, 4]
    assert summary["steps"] == 4 and summary["checkpoints"] == [2, 4]
    final, last = (load_file(run_dir / p / "model.safetensors") for p in ("final", "checkpoints/checkpoint-4"))
    assert final.keys() == last.keys() and all((final[k] == last[k]).all() for k in final)
    assert not any((run_dir / "final" / f).exists() for f in ("optimizer.pt", "scheduler.pt", "trainer_state.json"))


def test_a_tensorboard_run_writes_its_steps_as_events_under_the_run(tmp_path, tiny_model, grpo, monkeypatch):
    pytest.importorskip("tensorboard", reason="the test extra installs tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    g = {**grpo, "max_steps": 2, "report_to": "tensorboard"}
    run_dir = tmp_path / "run"
    train_grpo(str(tiny_model), rows(), lambda c, a, p: float(len(c) % 2 == 0), g, 0, run_dir, run_dir / "final",
               run_dir / "steps.parquet", run_name="tiny/swaps/hard/seed0")
    events = list((run_dir / "tracking" / "tensorboard").glob("events.out.tfevents.*"))
    assert events
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    assert [e.step for e in acc.Scalars("train/loss")] == [1, 2]


def test_the_tracker_is_not_part_of_what_a_run_resumes_from(tmp_path, tiny_model, grpo):
    pytest.importorskip("tensorboard", reason="the test extra installs tensorboard")
    lines = []
    _, _, run_dir = run(tmp_path, tiny_model, {**grpo, "max_steps": 2, "save_steps": 1}, lambda c, a, p: 1.0)
    (run_dir / "steps.parquet").unlink()
    run(tmp_path, tiny_model, {**grpo, "max_steps": 2, "save_steps": 1, "report_to": "tensorboard"},
        lambda c, a, p: 1.0, log=lines.append)
    assert any("is the run's last step: publishing it" in str(line) for line in lines)


def test_a_tracker_that_is_not_installed_is_named_with_its_install(tmp_path, monkeypatch):
    import importlib.util

    from hardex.tracking import TrackerError, tracker_args

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(TrackerError, match=r"needs the wandb package \(pip install wandb\)"):
        tracker_args("wandb", "m/t/s/seed0", tmp_path)


def test_4bit_base_weights_are_refused_on_a_cpu_before_the_model_loads(tmp_path, tiny_model, grpo):
    import torch

    if torch.cuda.is_available():
        pytest.skip("on a GPU 4-bit weights load: "
                    "tests/unit/test_training.py::test_4bit_base_weights_train_lora_on_a_gpu")
    from hardex.quantization import QuantizationError

    with pytest.raises(QuantizationError, match=r"grpo.quantization: 4bit needs a CUDA GPU"):
        run(tmp_path, tiny_model, {**grpo, "finetune": "lora", "quantization": "4bit"}, lambda c, a, p: 1.0)


def test_4bit_base_weights_train_lora_on_a_gpu(tmp_path, tiny_model, grpo):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU and bitsandbytes (no GPU here; the device tool runs it where one is lent)")
    pytest.importorskip("bitsandbytes")
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    g = {**grpo, "finetune": "lora", "lora": lora, "quantization": "4bit", "max_steps": 2, "save_steps": 1}
    summary, steps, run_dir = run(tmp_path, tiny_model, g, lambda c, a, p: float(len(c) % 2 == 0))
    assert summary["steps"] == 2 and (run_dir / "final" / "adapter_model.safetensors").exists()


def varies(c, a, p):
    """A reward that differs within most groups: real gradients."""
    return float(len(c) % 2 == 0)


def resumed_from(messages, checkpoint: str, recorded: int) -> bool:
    return any(str(m).startswith("resuming from") and str(m).endswith(f"/{checkpoint} ({recorded} steps recorded)")
               for m in messages)


def test_more_steps_under_a_fixed_schedule_continue_as_an_uninterrupted_run(tmp_path, tiny_model, grpo):
    """grpo.schedule_steps fixes the learning-rate schedule's horizon (cosine with warmup here): a finished run
    of 3 steps raised to 6 resumes from its checkpoint-3 and ends at the record and weights of a 6-step run
    that never stopped. 6 rows are 3 steps an epoch: the continuation trains the second epoch, whose order
    TRL's sampler restarted at epoch 0's on a resume. checkpoint-3, off save_steps, goes: the continued run
    keeps the checkpoints the uninterrupted one has, so evaluation reads the same steps."""
    import torch
    from safetensors.torch import load_file

    g = {**grpo, "schedule_steps": 6, "max_steps": 3, "save_steps": 2}
    _, first, run_dir = run(tmp_path, tiny_model, g, varies)
    assert first["step"].to_list() == [1, 2, 3] and checkpoint_steps(run_dir / "checkpoints") == [2, 3]
    with open(run_dir / "checkpoints/steps.jsonl", "a") as fh:
        fh.write('{"step": 4, "reward_me')  # what a kill while the next row was written leaves
    messages = []
    summary, continued, _ = run(tmp_path, tiny_model, {**g, "max_steps": 6}, varies, log=messages.append)
    assert resumed_from(messages, "checkpoint-3", 3), messages
    assert not any("afresh" in str(m) for m in messages)
    assert continued["step"].to_list() == [1, 2, 3, 4, 5, 6]
    assert continued.head(3).equals(first)  # the first run's rows, as it recorded them
    assert summary["checkpoints"] == [2, 4, 6]

    _, uninterrupted, other = run(tmp_path, tiny_model, {**g, "max_steps": 6}, varies, name="uninterrupted")
    computed = [c for c in continued.columns if c != "step_time"]
    assert continued.select(computed).equals(uninterrupted.select(computed))  # learning rates included
    assert checkpoint_steps(other / "checkpoints") == [2, 4, 6]
    mine, theirs = (load_file(d / "final" / "model.safetensors") for d in (run_dir, other))
    base = load_file(tiny_model / "model.safetensors")
    assert any(not torch.equal(mine[k], base[k]) for k in base), "the runs did not train"
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_more_steps_without_a_fixed_schedule_train_afresh_and_say_why(tmp_path, tiny_model, grpo):
    """The default: the schedule spans the run's own steps, so a run of 2 steps raised to 4 is another run
    (its cosine decays over 4 steps), trained from the base model."""
    _, _, run_dir = run(tmp_path, tiny_model, {**grpo, "max_steps": 2}, varies)
    messages = []
    summary, steps, _ = run(tmp_path, tiny_model, grpo, varies, log=messages.append)
    afresh = [str(m) for m in messages if "starting afresh" in str(m)]
    assert afresh and "max_steps: 2 -> 4" in afresh[0] and "schedule_steps" in afresh[0], messages
    assert "training from the base model" in messages
    assert steps["step"].to_list() == [1, 2, 3, 4] and summary["checkpoints"] == [2, 4]


def test_fewer_steps_under_a_fixed_schedule_publish_the_checkpoint_at_that_step_or_train_to_it(
        tmp_path, tiny_model, grpo):
    """Lowered to a step with a checkpoint, the run publishes it and trains nothing; lowered to a step without
    one, it trains from the checkpoint before. The later checkpoints go (evaluation reads every checkpoint)."""
    from safetensors.torch import load_file

    g = {**grpo, "schedule_steps": 6, "max_steps": 6, "save_steps": 2}
    _, full, run_dir = run(tmp_path, tiny_model, g, varies)
    kept = load_file(run_dir / "checkpoints/checkpoint-4/model.safetensors")
    messages = []
    summary, four, _ = run(tmp_path, tiny_model, {**g, "max_steps": 4}, varies, log=messages.append)
    assert any("fewer than the 6 trained: checkpoints [6] removed" in str(m) for m in messages), messages
    published = "checkpoint-4 is the run's last step: publishing it, nothing to train"
    assert any(str(m).endswith(published) for m in messages)
    assert four.equals(full.head(4)) and summary["checkpoints"] == [2, 4]
    final = load_file(run_dir / "final" / "model.safetensors")
    assert all((final[k] == kept[k]).all() for k in kept)

    messages = []
    summary, three, _ = run(tmp_path, tiny_model, {**g, "max_steps": 3}, varies, log=messages.append)
    assert resumed_from(messages, "checkpoint-2", 2), messages
    computed = [c for c in full.columns if c != "step_time"]
    assert three.select(computed).equals(full.head(3).select(computed))  # step 3 as the 6-step run made it
    assert summary["checkpoints"] == [2, 3]


def test_a_step_record_that_does_not_match_its_checkpoint_starts_the_run_afresh(tmp_path, tiny_model, grpo):
    """A continuation publishes the step record with the weights: one that lost a row cannot be published."""
    g = {**grpo, "schedule_steps": 4, "max_steps": 2}
    _, _, run_dir = run(tmp_path, tiny_model, g, varies)
    record = run_dir / "checkpoints/steps.jsonl"
    record.write_text(record.read_text().splitlines()[1] + "\n")  # step 1's row lost
    messages = []
    summary, steps, _ = run(tmp_path, tiny_model, {**g, "max_steps": 4}, varies, log=messages.append)
    assert any("holds 1 rows for the 2 steps of checkpoint-2, none for steps [1]" in str(m) and "starting afresh"
               in str(m) for m in messages), messages
    assert "training from the base model" in messages
    assert steps["step"].to_list() == [1, 2, 3, 4] and summary["checkpoints"] == [2, 4]


def test_a_run_past_its_fixed_decaying_schedule_is_refused(tmp_path, smoke_config, tiny_model, grpo):
    """Past its horizon transformers' cosine rises again and linear trains at 0: refused at planning where the
    config decides the steps, in the train job where the subset does (epochs of a pool of unknown size),
    before anything is written. A constant schedule may run past it (the horizon only places its warmup)."""
    cfg = copy.deepcopy(smoke_config)
    cfg["grpo"].update(schedule_steps=3)  # max_steps 4
    with pytest.raises(ConfigError, match=r"^grpo\.schedule_steps: a run of 4 steps goes past the 3 steps its cosine "
                                          r"learning-rate schedule spans, where the learning rate rises again"):
        check_config(cfg)
    cfg["grpo"]["lr_scheduler"] = "constant_with_warmup"
    assert check_config(cfg)["grpo"]["schedule_steps"] == 3
    g = {**grpo, "schedule_steps": 2, "lr_scheduler": "linear", "epochs": 1.0}  # 6 rows: 3 steps
    with pytest.raises(TrainingError, match=r"a run of 3 steps goes past the 2 steps its linear .* learning rate of 0"):
        run(tmp_path, tiny_model, g, varies)
    assert not (tmp_path / "run").exists()


# ---- a run held to its job's runtime limit (issue 64, item 2) ----


def paced(seconds: float, enforced: bool = True, started_ago: float = 0.0):
    """A job's limit of `seconds` from a start `started_ago` seconds back, estimated at an H100's stated peaks and
    0.01 s a step."""
    import time

    from hardex.time_limit import TimeLimit

    return TimeLimit(seconds, time.time() - started_ago, enforced, planned_step=0.01,
                     rates={"name": "H100", "tflops": 989.0, "hbm_gbps": 3350.0}, runtime_min=60)


def test_a_run_that_cannot_finish_within_its_limit_stops_after_its_second_step_naming_the_rate(
        tmp_path, tiny_model, grpo):
    from hardex.time_limit import OutOfTime

    messages = []
    run_dir = tmp_path / "run"
    # a job already 5 s into its 1 s limit: past it whatever the steps take (where TRL is imported already, a
    # fresh job's set-up and two tiny steps can take under a second: the suite once trained through)
    with pytest.raises(OutOfTime) as err:
        train_grpo(str(tiny_model), rows(), lambda c, a, p: 1.0, grpo, 0, run_dir, run_dir / "final",
                   run_dir / "steps.parquet", log=messages.append, time_limit=paced(1.0, started_ago=5.0))
    (line,) = [m for m in messages if str(m).startswith("[hardex] at ")]
    assert re.fullmatch(r"\[hardex\] at [\d.]+ s a step, 2 steps take about [\d.]+ (s|min) \([\d.]+ s run so far\) "
                        r"against the job's limit of 1\.0 s", line)
    message = str(err.value)
    assert "stopped at step 2 instead of at the limit" in message
    # the rate job_time reads, scaled by the pace measured against the 0.01 s it planned
    rate = re.search(r"set compute\.gpu_rates: \{name: H100, tflops: (\d+), hbm_gbps: (\d+)\}", message)
    assert rate and int(rate.group(1)) < 989 and int(rate.group(2)) < 3350
    assert not (run_dir / "final").exists()  # nothing published: the retry resumes from the checkpoints


@pytest.mark.parametrize("seconds,enforced", [(3600.0, True), (1.0, False)], ids=["time-enough", "not-enforced"])
def test_a_run_with_time_enough_or_no_enforced_limit_trains_through_and_says_its_pace(
        tmp_path, tiny_model, grpo, seconds, enforced):
    messages = []
    run_dir = tmp_path / "run"
    train_grpo(str(tiny_model), rows(), lambda c, a, p: 1.0, grpo, 0, run_dir, run_dir / "final",
               run_dir / "steps.parquet", log=messages.append, time_limit=paced(seconds, enforced))
    assert pl.read_parquet(run_dir / "steps.parquet")["step"].to_list() == [1, 2, 3, 4]
    (line,) = [m for m in messages if str(m).startswith("[hardex] at ")]
    limit = "1.0 h" if enforced else "1.0 s"
    assert ", 2 steps take about " in line and line.endswith(f"against the job's limit of {limit}")
