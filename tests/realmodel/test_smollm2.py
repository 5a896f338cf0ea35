"""SmolLM2-135M-Instruct through every stage: what only a real checkpoint exercises.

Its chat template (a default system prompt; bos <|im_start|>), its end-of-turn token <|im_end|> that is
also its pad token, its rambling answers, LoRA on its real Llama module names, and a GRPO step moving a
pretrained policy. The workflow run (`smollm2_run`) is the README's: Snakemake's own CLI on
tests/configs/realmodel.yaml.
"""

from __future__ import annotations

import json

import polars as pl
import pytest
import torch

from hardex.generation.hf import HFGenerator
from hardex.generation.sampling import Sampling
from hardex.models import encode_prompt, render_prompt
from hardex.tasks import get_task
from tests.realmodel.conftest import CONFIG
from tests.workflow.test_experiments import (
    DOCUMENTED,
    NEEDS_MODEL_PACKAGE,
    check_counts,
    dry_run,
    grid_counts,
    preset_path,
)

LLAMA_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _prompts(tok, n: int = 2) -> list[str]:
    task = get_task("addition", "flexible")
    return [render_prompt(tok, task.prompt({"question": f"What is {a} + {a + 1}?"}), chat=True)
            for a in range(1, n + 1)]


def test_the_prompt_carries_the_chat_template_once_and_generation_stops_at_im_end(smollm2_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    prompt = _prompts(tok, 1)[0]
    assert prompt.count("<|im_start|>system") == 1 and prompt.count("<|im_start|>user") == 1
    ids = encode_prompt(tok, prompt)
    im_start = tok.convert_tokens_to_ids("<|im_start|>")
    assert ids[0] == im_start and ids[1] != im_start  # the template's own start token, not a second one
    assert ids.count(im_start) == 3  # system, user, assistant turns
    gen = HFGenerator(str(smollm2_dir), dtype="float32", progress=False)
    rows = gen.generate_ids([prompt], 8, Sampling(0.7, 1.0, 48), seed=0)[0]
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    stopped = [r for r in rows if len(r) < 48]
    assert stopped, "no sample ended within 48 tokens"
    for r in stopped:  # a sample that ended ends with <|im_end|>, once
        assert r[-1] == im_end and r.count(im_end) == 1, tok.decode(r)


@pytest.mark.parametrize("rollouts", ["hardex", "trl"])
def test_the_completion_mask_keeps_im_end_and_drops_the_padding_after_it(smollm2_dir, tmp_path, rollouts):
    """pad == eos: a mask built from the pad token would drop the end-of-turn token that ends a
    completion, and the policy would never learn to stop."""
    import yaml
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hardex.config import check_config
    from hardex.rollouts import HardexRollouts, rollout_generator
    from hardex.settings import grpo_settings
    from hardex.training import _trainer_class, grpo_args

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    assert tok.pad_token_id == tok.eos_token_id
    cfg = check_config(yaml.safe_load(CONFIG.read_text()))
    g = {**grpo_settings(cfg, "smol"), "max_completion_length": 48, "rollouts": rollouts}
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    trainer = _trainer_class()(
        model=model, reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=grpo_args(g, 0, tmp_path, use_cpu=True, steps=1),
        train_dataset=Dataset.from_list([{"prompt": p} for p in _prompts(tok)]), processing_class=tok,
        rollout_func=HardexRollouts(g, 0, rollout_generator(g, 0)) if rollouts == "hardex" else None)
    inputs = [{"prompt": p} for p in _prompts(tok) for _ in range(4)]
    batch = trainer._generate_and_score_completions(inputs)
    ids, mask = batch["completion_ids"], batch["completion_mask"]
    im_end = tok.eos_token_id
    ended = 0
    for row, keep in zip(ids.tolist(), mask.tolist()):
        n = sum(keep)
        assert keep == [1] * n + [0] * (len(keep) - n)  # one masked run from the start
        if im_end in row[:n]:
            ended += 1
            assert row[n - 1] == im_end and row[: n - 1].count(im_end) == 0  # <|im_end|> kept, once, last
            assert all(t == im_end for t in row[n:])  # what follows is padding (the same id), masked out
    assert ended, "no completion ended within 48 tokens"


def test_the_scorer_reads_the_real_models_answers(smollm2_run):
    """The probe's own samples, judged again by the scorer: a right one states the sum as its last number."""
    samples = pl.read_parquet(smollm2_run / "results/probe/smol/addition.samples.parquet")
    pool = pl.read_parquet(smollm2_run / "results/data/addition/pool.parquet")
    task = get_task("addition", "flexible")
    answers = dict(zip(pool["id"], pool["answer"]))
    for row in samples.iter_rows(named=True):
        assert task.is_correct(row["completion"], answers[row["id"]]) == row["correct"]
    right = samples.filter("correct")
    assert right.height, "the model solved no one-digit sum in the probe"
    assert all(task.answer(c, answers[i]) == answers[i] for i, c in zip(right["id"], right["completion"]))


def test_the_easiest_tier_has_learnable_examples_and_the_run_reached_its_report(smollm2_run):
    probe = pl.read_parquet(smollm2_run / "results/probe/smol/addition.parquet")
    assert probe.filter(pl.col("tier") == "1")["pass_rate"].mean() > 0
    log = (smollm2_run / "logs/probe/smol/addition.log").read_text()
    assert "learnable:" in log and "pool examples" in log
    for strategy in ("easy", "random"):
        steps = pl.read_parquet(smollm2_run / f"results/train/smol/addition/{strategy}/seed0/steps.parquet")
        assert steps["step"].to_list() == [1, 2]
        ev = pl.read_parquet(smollm2_run / f"results/eval/smol/addition/{strategy}/seed0.parquet")
        assert sorted(ev["step"].unique().to_list()) == [2]
    assert (smollm2_run / "results/tables/accuracy_gain.md").exists()
    assert (smollm2_run / "results/figures/accuracy_curves.png").exists()


def test_lora_sits_on_every_projection_of_the_llama_layers_and_a_step_moves_the_logits(smollm2_run, smollm2_dir):
    from peft import PeftModel
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, AutoTokenizer

    final = smollm2_run / "results/train/smol/addition/easy/seed0/final"
    config = json.loads((smollm2_dir / "config.json").read_text())
    with safe_open(str(final / "adapter_model.safetensors"), "pt") as fh:
        lora_a = [k for k in fh.keys() if "lora_A" in k]
    layers = config["num_hidden_layers"]
    assert layers == 30 and len(lora_a) == layers * len(LLAMA_PROJECTIONS)
    for proj in LLAMA_PROJECTIONS:
        assert sum(f".{proj}." in k for k in lora_a) == layers, proj
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    ids = torch.tensor([encode_prompt(tok, _prompts(tok, 1)[0])])
    base = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32)
    with torch.no_grad():
        before = base(ids).logits
        after = PeftModel.from_pretrained(base, str(final))(ids).logits
    assert (after - before).abs().max() > 1e-4  # two GRPO steps moved the pretrained policy


def test_the_same_seed_gives_the_same_probe_table_twice(smollm2_dir, tmp_path):
    from transformers import AutoTokenizer

    from hardex.probing import probe_pool

    task = get_task("addition", "flexible")
    pool = task.load_split({"name": "pool", "n": 3, "seed": 5, "difficulty": [1, 1]})
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    settings = {"k": 3, "temperature": 0.7, "top_p": 1.0, "max_new_tokens": 24, "seed": 0}
    make = lambda: HFGenerator(str(smollm2_dir), dtype="float32", progress=False)  # noqa: E731
    render = lambda text: render_prompt(tok, text, chat=True)  # noqa: E731
    tables = [probe_pool(pool, task, render, make, settings, tmp_path / f"work{i}", log=lambda *a: None)
              for i in range(2)]
    assert tables[0][0].equals(tables[1][0]) and tables[0][1].equals(tables[1][1])


@pytest.mark.parametrize("name", sorted(NEEDS_MODEL_PACKAGE))
def test_the_real_model_configs_plan_their_documented_grid(tmp_path, smollm2_dir, name):
    """The default and the experiments on this model, which the main suite cannot plan without its package."""
    import yaml

    path = preset_path(name)
    stats = dry_run(tmp_path, path)
    check_counts(stats, grid_counts(yaml.safe_load(path.read_text())))
    assert grid_counts(yaml.safe_load(path.read_text())) == DOCUMENTED[name]


@pytest.mark.parametrize("name", ["survey", "survey-128"])
def test_the_survey_configs_plan_a_probe_per_task_and_train_nothing(tmp_path, smollm2_dir, name):
    """docs/rg-survey.md's runs: `snakemake survey` probes every pool (its data split and data check first) and
    trains nothing."""
    import yaml

    from tests.support import ROOT, snakemake
    from tests.workflow.test_experiments import job_stats

    path = ROOT / "docs" / "rg-survey" / f"{name}.yaml"
    tasks = len(yaml.safe_load(path.read_text())["tasks"])
    res = snakemake(tmp_path, "-n", "survey", "--quiet", "rules", configfile=path, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert job_stats(res.stdout + res.stderr) == {"dataset_split": 2 * tasks, "check_overlap": tasks, "probe": tasks,
                                                  "convert_model": 1, "survey": 1}
