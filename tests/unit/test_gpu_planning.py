"""What a GPU run asks of the machine before it runs (issue 43, items 12-13): a generation batch sized per
model so that the largest evaluate job keeps a margin, and Slurm's runtime and host memory derived from each
job's work rather than the model's size alone.

Hub models are planned offline from a stub hub cache holding only their config.json (tests.support)."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from hardex.config import check_config
from hardex.job_time import RUNTIME_SAFETY, runtime_minutes, train_seconds
from hardex.memory_estimate import usable_gib
from hardex.memory_plan import check_plan, plan
from tests.support import ROOT, snakemake, stub_hub_cache, write_config

PRESETS = ["hard_examples_paper", "hard_examples_code"]
HUB_MODELS = ["Qwen/Qwen3-4B", "Qwen/Qwen3-14B", "microsoft/phi-4", "meta-llama/Llama-3.1-8B-Instruct"]


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """An offline hub cache with the presets' models (their config.json only), for check_config and for
    Snakemake's CLI (HF_HUB_CACHE in the environment it inherits)."""
    from huggingface_hub import constants

    cache = stub_hub_cache(tmp_path / "hub", HUB_MODELS)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def preset(name: str) -> dict:
    return yaml.safe_load((ROOT / "experiments" / f"{name}.yaml").read_text())


def job(plans, model: str, kind: str):
    return next(p for p in plans if p.model == model and p.kind == kind)


# ---- 12. a model's own token budget, and phi-4's evaluate job with a margin ----


@pytest.mark.parametrize("name", PRESETS)
def test_phi4s_evaluate_job_is_planned_with_a_margin(hub, name):
    plans = check_plan(check_config(preset(name)))
    evaluate = job(plans, "phi4", "evaluate")
    # 79.5 of 79.6 usable GiB at the shared budget: its own budget leaves 10 GiB or more
    assert evaluate.estimate.total <= usable_gib(80) - 10
    assert evaluate.micro_batch == "107x762"  # models.phi4.token_budget 81920: 107 prompts of 512 + 250 tokens


def test_a_models_token_budget_replaces_the_generation_budget_for_that_model_only(hub):
    cfg = preset("hard_examples_paper")
    shared = job(plan(check_config(copy.deepcopy(cfg))), "qwen3-14b", "evaluate").micro_batch
    cfg["models"]["qwen3-14b"]["token_budget"] = 32768
    plans = plan(check_config(cfg))
    assert job(plans, "qwen3-14b", "evaluate").micro_batch == "43x762" != shared  # 32768 // 762
    assert job(plans, "qwen3-4b", "evaluate").micro_batch == shared  # the others keep generation.token_budget


def test_advice_names_the_models_own_budget(hub):
    cfg = preset("hard_examples_paper")
    del cfg["models"]["phi4"]["token_budget"]
    cfg["generation"]["token_budget"] = 262144
    cfg = check_config(cfg)
    advice = job(plan(cfg), "phi4", "evaluate").advice
    assert re.search(r"set models\.phi4\.token_budget: \d+", advice)
    cfg["models"]["phi4"]["token_budget"] = 262144
    assert re.search(r"lower models\.phi4\.token_budget to \d+", job(plan(cfg), "phi4", "evaluate").advice)


def test_a_token_budget_below_the_schemas_least_is_refused(hub):
    from hardex.config import ConfigError

    cfg = preset("hard_examples_paper")
    cfg["models"]["phi4"]["token_budget"] = 100
    with pytest.raises(ConfigError, match=r"^models\.phi4\.token_budget: 100 is out of range"):
        check_config(cfg)


# ---- 13. Slurm's runtime and memory from the work ----


def dry_run_resources(tmp_path, cfg: dict, *targets: str) -> dict[str, dict[str, int]]:
    """rule -> its resources as `snakemake -n` prints them for these targets."""
    tmp_path.mkdir(exist_ok=True)
    res = snakemake(tmp_path, "-n", "--cores", "1", *targets, configfile=write_config(tmp_path, cfg), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out, found = res.stdout + res.stderr, {}
    for block in re.split(r"\n(?=rule \w+:)", out):
        rule = re.match(r"rule (\w+):", block)
        line = re.search(r"resources: (.*)", block)
        if rule and line:
            found[rule.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)\b(?![.])", line.group(1))}
    return found


def test_the_paper_presets_phi4_train_job_asks_for_more_than_its_steps_take(tmp_path, hub):
    # the estimate of a phi-4 step of this preset: 50-75 s, 14-21 h for its 1000 steps; the
    # size-based runtime gave (60 + 60 x 14.7) min = 15.7 h, and attempt 1 timed out
    cfg = preset("hard_examples_paper")
    resources = dry_run_resources(tmp_path, cfg, "results/train/phi4/gsm8k/hard/seed0/steps.parquet")
    minutes = resources["train"]["runtime"]
    assert minutes * 60 > 1000 * 75
    seconds = train_seconds(check_config(copy.deepcopy(cfg)), "phi4", 1000)
    assert 1000 * 50 < seconds < minutes * 60 / RUNTIME_SAFETY * 1.01  # the estimate, with its safety factor
    # a retry asks for twice as long, not the size formula's
    checked = check_config(copy.deepcopy(cfg))
    assert runtime_minutes(checked, "phi4", seconds, 2) == 2 * runtime_minutes(checked, "phi4", seconds, 1)


def test_the_one_measured_real_size_step_is_predicted_within_the_safety_factor(hub):
    """docs/gpu-runs.md (2026-11-27, one H200): the paper preset's Qwen3-4B step (32 prompts x 8, 250 tokens,
    500-token prompts, LoRA r 32, gradient checkpointing, beta 0.1, accumulation 8, graph decode) took 79.2 s.
    The rates stated before gave 28.1 s, and its 1000 steps (22 h) overran the 13.3 h Slurm was asked for."""
    measured = 79.2
    cfg = check_config(preset("hard_examples_paper"))
    cfg["compute"].update(gpu_kind="h200", prompt_tokens=500)  # the card and prompts it was measured with
    predicted = train_seconds(cfg, "qwen3-4b", 1)
    assert measured / RUNTIME_SAFETY <= predicted <= measured * RUNTIME_SAFETY
    assert predicted == pytest.approx(measured, rel=0.05)  # the correction predicts the step it comes from
    # the preset's 1000 steps at the measured pace fit the limit its train job asks for, at its first attempt
    assert runtime_minutes(cfg, "qwen3-4b", train_seconds(cfg, "qwen3-4b", 1000), 1) * 60 > 1000 * measured


def test_the_runtime_follows_the_steps_not_the_model_size(hub):
    cfg = check_config(preset("hard_examples_paper"))
    long, short = (runtime_minutes(cfg, "qwen3-4b", train_seconds(cfg, "qwen3-4b", n), 1) for n in (1000, 10))
    assert long > 20 * short / 2  # 100x the steps: far more time (the fixed start-up aside)
    # a CPU run keeps the size-based runtime (no GPU rate applies)
    cpu = copy.deepcopy(cfg)
    cpu["compute"].update(gpu=0, gpu_memory_gb=None)
    assert runtime_minutes(cpu, "qwen3-4b", 1e6, 1) == 60 + 60 * 4


def test_host_memory_of_eight_processes_is_one_model_and_eight_processes(tmp_path, hub):
    # each process's model goes to its GPU; the weights' pages are shared in the page cache: 976 GB
    # (8 x 122) for Qwen3-14B x 8 was what the old rule asked
    cfg = preset("hard_examples_paper")
    target = "results/train/qwen3-14b/gsm8k/hard/seed0/steps.parquet"
    one = dry_run_resources(tmp_path / "one", cfg, target)["train"]["mem_mb"]
    cfg["grpo"].update(processes=8, distributed="multi_gpu")
    eight = dry_run_resources(tmp_path / "eight", cfg, target)["train"]["mem_mb"]
    assert one == 4000 + 8000 * 14.8
    assert eight == 8 * 4000 + 8000 * 14.8 < 2 * one


def test_a_job_whose_architecture_cannot_be_read_asks_for_the_size_formulas_runtime(tmp_path):
    """A local model with an empty config.json (its first job names what it lacks) must not fail planning in
    the runtime estimate; on a CPU nothing is estimated at all."""
    from hardex.job_time import sampling_minutes

    (tmp_path / "config.json").write_text("{}")
    cfg = {"compute": {"gpu": 1, "runtime_min": 60, "runtime_min_per_b": 60},
           "models": {"mine": {"path": str(tmp_path), "size_b": 1.0}}, "generation": {}}
    assert sampling_minutes(cfg, "mine", [(100, 4, 64, 1.0)], attempt=1) == 120
