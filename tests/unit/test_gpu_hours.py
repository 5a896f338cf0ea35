"""The rates a GPU job's work is estimated at (hardex.job_time, issue 46 item 6): stated per GPU kind
(compute.gpu_kind), or measured by the train steps a model's runs recorded in the working directory, and the
GPU-hours per model that `snakemake -n` prints from them."""

from __future__ import annotations

import copy

import polars as pl
import pytest

from hardex import layout
from hardex.config import ConfigError, check_config
from hardex.job_time import (
    GPU_RATES,
    gpu_hours,
    gpu_hours_lines,
    gpu_rates,
    gpus_per_job_line,
    measured_train,
    sampling_seconds,
    train_seconds,
)
from hardex.settings import decodings


@pytest.fixture
def gpu_config(smoke_config) -> dict:
    cfg = copy.deepcopy(smoke_config)
    cfg["compute"] = {"gpu": 1}
    return check_config(cfg)


def benchmarks(cfg: dict):
    """A task's benchmark params as the evaluate jobs get them (no greedy, no base_pass_k in the smoke config)."""
    d = decodings(cfg)
    return lambda task, base: [{"ref": b, "decoding": d[b]} for b in cfg["tasks"][task]["benchmarks"]]


def write_steps(root, model: str, step_times: list[float], strategy: str = "hard", seed: int = 0) -> None:
    path = root / layout.fill(layout.STEPS, model=model, task="swaps", strategy=strategy, seed=seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"step": list(range(1, len(step_times) + 1)), "step_time": step_times}).write_parquet(path)


# ---- the rate per GPU kind ----


def test_the_rates_follow_the_gpu_kind(gpu_config):
    assert gpu_rates(gpu_config) is GPU_RATES["h100"]  # the schema's default: the rates stated before
    seconds = {}
    for kind in ("h100", "h200", "a100"):
        cfg = {**gpu_config, "compute": {**gpu_config["compute"], "gpu_kind": kind}}
        assert gpu_rates(cfg) is GPU_RATES[kind]
        seconds[kind] = (train_seconds(cfg, "tiny", 10), sampling_seconds(cfg, "tiny", [(100, 4, 64, 1.0)]))
    # an A100 has a third of an H100's bf16 FLOP/s and less bandwidth: slower at both
    assert seconds["a100"][0] > seconds["h100"][0] and seconds["a100"][1] > seconds["h100"][1]
    # an H200 has the H100's compute and more bandwidth: decoding no slower, nothing faster than bandwidth allows
    assert seconds["h200"][1] <= seconds["h100"][1]


def test_each_kinds_rates_are_its_peaks_times_the_same_utilisation():
    h100, h200, a100 = GPU_RATES["h100"], GPU_RATES["h200"], GPU_RATES["a100"]
    assert (h100.peak_flops, h100.peak_bytes_per_s) == (989e12, 3.35e12)
    assert h200.peak_flops == h100.peak_flops and h200.peak_bytes_per_s > h100.peak_bytes_per_s
    assert h100.flops / h100.peak_flops == a100.flops / a100.peak_flops
    assert h100.source() == "H100 stated rates: 30% of 989 TFLOP/s bf16, 45% of 3.35 TB/s"


def test_an_unknown_gpu_kind_is_refused_naming_the_key(smoke_config):
    cfg = copy.deepcopy(smoke_config)
    cfg["compute"] = {"gpu": 1, "gpu_kind": "v100"}
    with pytest.raises(ConfigError, match=r"^compute\.gpu_kind") as err:
        check_config(cfg)
    assert "\n" not in str(err.value)
    assert str(err.value).endswith("for another card state its peaks in compute.gpu_rates")


def test_another_cards_stated_peaks_replace_the_kinds(gpu_config):
    cfg = {**gpu_config, "compute": {**gpu_config["compute"], "gpu_rates": {"tflops": 362, "hbm_gbps": 864}}}
    rates = gpu_rates(cfg)
    assert (rates.peak_flops, rates.peak_bytes_per_s) == (362e12, 864e9)
    assert rates.flops / rates.peak_flops == GPU_RATES["h100"].flops / GPU_RATES["h100"].peak_flops
    assert rates.source() == "compute.gpu_rates stated rates: 30% of 362 TFLOP/s bf16, 45% of 0.864 TB/s"


# ---- a measured rate is preferred where a model's runs recorded steps ----


def test_without_records_the_stated_rate_is_used_and_named(gpu_config, tmp_path):
    assert measured_train(gpu_config, "tiny", tmp_path) is None
    lines = gpu_hours_lines(gpu_config, benchmarks(gpu_config), root=tmp_path)
    assert "H100 stated rates: 30% of 989 TFLOP/s" in lines[0]
    assert lines[1].startswith("  tiny: probe 1 job x 1 GPU ") and lines[1].endswith("(H100 stated rates)")


def test_recorded_steps_give_the_train_rate_and_the_line_says_so(gpu_config, tmp_path):
    estimate = train_seconds(gpu_config, "tiny", 1)
    # two runs, 5 steps in all, each step 3x as long as the stated rates estimate
    write_steps(tmp_path, "tiny", [3 * estimate] * 3)
    write_steps(tmp_path, "tiny", [3 * estimate] * 2, strategy="easy")
    measured = measured_train(gpu_config, "tiny", tmp_path)
    assert measured.steps == 5 and measured.factor == pytest.approx(3.0)
    stated = gpu_hours(gpu_config, "tiny", benchmarks(gpu_config))
    at_measured = gpu_hours(gpu_config, "tiny", benchmarks(gpu_config), measured)
    assert at_measured["train"].hours == pytest.approx(3 * stated["train"].hours)
    assert at_measured["probe"] == stated["probe"]  # the train steps say nothing of a probe's rate
    line = gpu_hours_lines(gpu_config, benchmarks(gpu_config), root=tmp_path)[1]
    assert "(train at the rate measured in results/train/tiny (5 steps, 3.00x the H100 stated estimate))" in line


def test_the_measured_rate_follows_the_steps_recorded_not_the_steps_planned(gpu_config, tmp_path):
    # a pilot of 4 steps, then max_steps doubled: the rate compares the pilot's 4 steps with 4 steps' estimate
    write_steps(tmp_path, "tiny", [2 * train_seconds(gpu_config, "tiny", 1)] * 4)
    longer = copy.deepcopy(gpu_config)
    longer["grpo"]["max_steps"] *= 2
    assert measured_train(longer, "tiny", tmp_path).factor == pytest.approx(2.0)
    short, long = (gpu_hours(c, "tiny", benchmarks(c), measured_train(c, "tiny", tmp_path))["train"].hours
                   for c in (gpu_config, longer))
    assert long == pytest.approx(2 * short)


def test_a_cpu_config_prints_no_gpu_hours(smoke_config, tmp_path):
    cfg = check_config(copy.deepcopy(smoke_config))
    assert gpu_hours_lines(cfg, benchmarks(cfg), root=tmp_path) == []


def test_gpus_per_job_count_into_the_hours(gpu_config):
    two = copy.deepcopy(gpu_config)
    two["grpo"]["processes"] = 2
    one, both = (gpu_hours(c, "tiny", benchmarks(c))["train"] for c in (gpu_config, two))
    # two processes share a step's work (half the seconds each) on two GPUs: the same GPU-hours
    assert (one.gpus, both.gpus) == (1, 2) and both.hours == pytest.approx(one.hours)
    assert one.jobs == 6  # hard, easy, random, hard_online, hard_random_reward, hard_format; seed 0


# ---- compute.gpu is per job: said where it is above one ----


def test_gpus_per_job_are_said_where_compute_gpu_is_above_one(gpu_config):
    """issue 61: `compute.gpu: 8` meant "my node has 8" and `grpo.processes: 8` beside it made train jobs of 64
    GPUs, with no word at planning."""
    assert gpus_per_job_line(gpu_config) is None  # compute.gpu 1: one GPU a job, as it reads
    cfg = {**gpu_config, "compute": {**gpu_config["compute"], "gpu": 8},
           "grpo": {**gpu_config["grpo"], "processes": 8}}
    line = gpus_per_job_line(cfg)
    assert line.startswith("compute.gpu 8 is each job's GPUs, not the node's: a train job takes 64 (tiny), a probe "
                           "or evaluate job 8; 64 is more than a 8-GPU node holds, and a run trains on one node")
    assert any(line in out for out in gpu_hours_lines(cfg, benchmarks(cfg)))
    cfg["grpo"] = {**cfg["grpo"], "processes": 1}
    assert "more than" not in gpus_per_job_line(cfg) and "a train job takes 8 (tiny)" in gpus_per_job_line(cfg)


def test_a_train_jobs_time_limit_is_its_runtime_and_planned_step_and_enforced_under_slurm(gpu_config, monkeypatch):
    from hardex.job_time import train_time_limit

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    limit = train_time_limit(gpu_config, "tiny", 90, started=100.0)
    assert (limit.seconds, limit.started, limit.enforced) == (5400, 100.0, False)  # a local run is only told
    assert limit.planned_step == pytest.approx(train_seconds(gpu_config, "tiny", 1))
    assert limit.rates == {"name": "H100", "tflops": 989.0, "hbm_gbps": 3350.0}
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert train_time_limit(gpu_config, "tiny", 90).enforced
    assert train_time_limit(gpu_config, "tiny", None) is None
    # the rate to set holds the pace measured: the peaks over measured / planned
    assert "tflops: 494, hbm_gbps: 1675}" in limit.advice(2 * limit.planned_step, 6000)
