"""`snakemake -n` prints the GPU-hours of a GPU config's jobs per model beside the memory plan, from their work
at the stated rates of compute.gpu_kind (issue 46, item 6), through Snakemake's own CLI; a CPU config prints
none. hardex.job_time's rates and the measured rate: tests/unit/test_gpu_hours.py."""

from __future__ import annotations

import copy
import re

import pytest

from tests.support import snakemake, write_config

LINE = re.compile(r"^  tiny: probe (\d+) job x (\d+) GPU (\S+) h, train (\d+) jobs x (\d+) GPUs? (\S+) h, "
                  r"evaluate (\d+) jobs x (\d+) GPUs? (\S+) h; total (\S+) GPU-hours \((.*)\)$", re.M)


def dry_run(tmp_path, cfg: dict, name: str) -> str:
    workdir = tmp_path / name
    workdir.mkdir()
    res = snakemake(workdir, "-n", "--cores", "1", configfile=write_config(workdir, cfg), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout + res.stderr


def hours(out: str) -> dict:
    m = LINE.search(out)
    assert m, out[:3000]
    probe_jobs, probe_gpus, probe, train_jobs, train_gpus, train, eval_jobs, eval_gpus, evaluate, total, source = \
        m.groups()
    return dict(probe=float(probe), train=float(train), evaluate=float(evaluate), total=float(total),
                jobs=(int(probe_jobs), int(train_jobs), int(eval_jobs)),
                gpus=(int(probe_gpus), int(train_gpus), int(eval_gpus)), source=source)


def test_the_gpu_hours_follow_the_work(tmp_path, smoke_config):
    cfg = copy.deepcopy(smoke_config)
    cfg["compute"] = {"gpu": 1}
    out = dry_run(tmp_path, cfg, "steps4")
    # after the memory plan, a line naming the rates' source, then one per model
    plan_at, hours_at = out.index("hardex: memory plan"), out.index("hardex: GPU-hours of each model's jobs")
    assert plan_at < hours_at
    assert "at H100 stated rates: 30% of 989 TFLOP/s bf16, 45% of 3.35 TB/s (compute.gpu_kind)" in out
    base = hours(out)
    # 1 probe; 6 runs (3 strategies, hard_online and 2 controls) x seed 0; their 6 evaluations and the base's
    assert base["jobs"] == (1, 6, 7) and base["gpus"] == (1, 1, 1)
    assert base["source"] == "H100 stated rates"
    assert base["total"] == pytest.approx(base["probe"] + base["train"] + base["evaluate"], rel=0.01)

    cfg["grpo"]["max_steps"] *= 2
    doubled = hours(dry_run(tmp_path, cfg, "steps8"))
    assert doubled["train"] / base["train"] == pytest.approx(2, rel=0.01)
    assert doubled["probe"] == base["probe"]  # probing does not depend on training
    assert doubled["evaluate"] > base["evaluate"]  # more checkpoints to evaluate

    cfg["compute"]["gpu_kind"] = "a100"
    a100 = dry_run(tmp_path, cfg, "a100")
    assert "at A100 stated rates: 30% of 312 TFLOP/s bf16, 45% of 2.039 TB/s" in a100
    assert hours(a100)["train"] > doubled["train"]

    # a card gpu_kind does not list: its data sheet's peaks, in place of gpu_kind's (issue 61)
    cfg["compute"]["gpu_rates"] = {"name": "L40S", "tflops": 362, "hbm_gbps": 864}
    l40s = dry_run(tmp_path, cfg, "l40s")
    assert "at L40S stated rates: 30% of 362 TFLOP/s bf16, 45% of 0.864 TB/s (compute.gpu_rates)" in l40s
    assert hours(a100)["train"] < hours(l40s)["train"]  # a bit more compute than an A100, but less bandwidth


def test_a_cpu_config_prints_no_gpu_hours(tmp_path, smoke_config):
    out = dry_run(tmp_path, copy.deepcopy(smoke_config), "cpu")
    assert "GPU-hours" not in out and "Job stats" in out


def test_a_job_that_asks_more_gpus_than_the_resource_grants_is_refused_at_planning(tmp_path, smoke_config):
    """grpo.processes 2 at compute.gpu 1 is a train job of 2 GPUs: under --resources gpu=1 Snakemake would run it
    on one, both processes on it. Planning says so in one line; with the GPUs granted it plans."""
    cfg = copy.deepcopy(smoke_config)
    cfg["compute"] = {"gpu": 1}
    cfg["grpo"]["processes"] = 2
    workdir = tmp_path / "short"
    workdir.mkdir()
    res = snakemake(workdir, "-n", "--cores", "1", "--resources", "gpu=1", configfile=write_config(workdir, cfg))
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1] == (
        "hardex: config error: models.tiny: a train job takes 2 GPUs (compute.gpu 1 for each of grpo.processes 2), "
        "more than --resources gpu=1: Snakemake would run it on 1, its processes sharing them; lower grpo.processes "
        "or raise the resource")
    res = snakemake(workdir, "-n", "--cores", "1", "--resources", "gpu=2", configfile=write_config(workdir, cfg))
    assert res.returncode == 0, res.stderr[-3000:]
