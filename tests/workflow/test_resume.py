"""Kill the workflow mid-training; the rerun finishes the run from its last checkpoint."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import polars as pl

from tests.support import ROOT, snakemake, write_config


def start_then_kill_job(cmd, workdir, script, ready, what):
    """Start the workflow, wait until `ready()`, then SIGKILL the job running `script` (as a
    preemption or the OOM killer would); Snakemake sees the job fail, deletes its declared outputs
    and releases its lock. Returns the environment for the rerun."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 600
    while not ready():
        assert proc.poll() is None, "workflow ended before it could be killed"
        assert time.time() < deadline, f"no {what} within 10 minutes"
        time.sleep(0.1)
    job = subprocess.run(["pgrep", "-s", str(proc.pid), "-f", script], capture_output=True, text=True)
    for pid in job.stdout.split():
        os.kill(int(pid), signal.SIGKILL)
    assert proc.wait(timeout=120) != 0
    return env


def one_long_run(workdir, cfg):
    """In a copy of the finished smoke run (model built, pool probed), the smoke config cut to one GRPO
    run of 12 steps with a checkpoint every 2, with no run and no evaluation left; its run folder."""
    cfg["selection"]["strategies"] = ["hard"]
    cfg["selection"]["online_strategies"] = []
    cfg["grpo"].update(max_steps=12, save_steps=2)
    write_config(workdir, cfg)
    shutil.rmtree(workdir / "results/train")
    shutil.rmtree(workdir / "results/eval")
    return workdir / "results/train/tiny/swaps/hard/seed0"


def test_killed_training_resumes_from_last_checkpoint(smoke_copy, smoke_config):
    tmp_path = smoke_copy
    run_dir = one_long_run(tmp_path, smoke_config)
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(tmp_path / "config.yaml"), "--cores", "1", "--rerun-incomplete",
           str(run_dir.relative_to(tmp_path) / "steps.parquet")]
    ckpt4 = run_dir / "checkpoints/checkpoint-4/trainer_state.json"
    env = start_then_kill_job(cmd, tmp_path, "train.py", ckpt4.exists, "checkpoint-4")
    assert not (run_dir / "steps.parquet").exists()
    killed_at = max(int(p.name.split("-")[1]) for p in (run_dir / "checkpoints").glob("checkpoint-*"))
    assert killed_at < 12

    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    log = (tmp_path / "logs/train/tiny/swaps/hard/seed0.log").read_text()
    assert "resuming from" in log and "checkpoint-" in log
    steps = pl.read_parquet(run_dir / "steps.parquet")
    assert steps["step"].to_list() == list(range(1, 13))  # same steps as an uninterrupted run, none twice
    kept = sorted(int(p.name.split("-")[1]) for p in (run_dir / "checkpoints").glob("checkpoint-*"))
    assert kept == [2, 4, 6, 8, 10, 12]  # no checkpoint lost


def test_raising_max_steps_under_a_fixed_schedule_continues_the_finished_run(smoke_copy, smoke_config):
    """grpo.schedule_steps set: a finished 2-step run raised to 4 reruns its train job (its params changed, and
    Snakemake deletes its outputs first); the job continues from checkpoint-2, which is no output, and the
    run's evaluation reads every checkpoint, the first run's included."""
    tmp_path, cfg = smoke_copy, smoke_config
    cfg["grpo"].update(schedule_steps=4, max_steps=2)  # save_steps 2
    write_config(tmp_path, cfg)
    run_dir = tmp_path / "results/train/tiny/swaps/hard/seed0"
    evaluation, log = "results/eval/tiny/swaps/hard/seed0.parquet", tmp_path / "logs/train/tiny/swaps/hard/seed0.log"
    res = snakemake(tmp_path, "--cores", "1", evaluation, forked=True)  # no kill here: forked jobs suffice
    assert res.returncode == 0, res.stderr[-3000:]
    # the smoke run's checkpoints decayed over its own 4 steps: under another schedule it trains afresh, once
    assert "schedule_steps: None -> 4" in log.read_text() and "training from the base model" in log.read_text()
    first = pl.read_parquet(run_dir / "steps.parquet")
    assert first["step"].to_list() == [1, 2]

    cfg["grpo"]["max_steps"] = 4
    write_config(tmp_path, cfg)
    res = snakemake(tmp_path, "--cores", "1", evaluation, forked=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert re.search(r"resuming from \S+/checkpoints/checkpoint-2 \(2 steps recorded\)", log.read_text())
    steps = pl.read_parquet(run_dir / "steps.parquet")
    assert steps["step"].to_list() == [1, 2, 3, 4] and steps.head(2).equals(first)
    assert sorted(pl.read_parquet(tmp_path / evaluation)["step"].unique().to_list()) == [2, 4]


def test_raising_max_steps_over_trained_runs_without_a_fixed_schedule_is_refused_at_planning(smoke_copy, smoke_config):
    """Without grpo.schedule_steps a longer run is another run: its train job would delete the finished
    checkpoints and train from the base model. Planning refuses it in one line naming both ways out; once the
    user deletes a run's checkpoints, that run plans as any settings change does."""
    tmp_path, cfg = smoke_copy, smoke_config
    cfg["grpo"]["max_steps"] = 8
    write_config(tmp_path, cfg)
    res = snakemake(tmp_path, "-n", "--cores", "1")
    assert res.returncode == 1
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("hardex: config error: grpo.max_steps: 4 -> 8 would delete the checkpoints of 6 trained "
                           "run(s) (results/train/tiny/swaps/easy/seed0, "), line
    assert "delete their checkpoints first" in line and "set grpo.schedule_steps" in line
    assert (tmp_path / "results/train/tiny/swaps/hard/seed0/checkpoints/checkpoint-4").exists()
    for run in (tmp_path / "results/train").glob("*/*/*/seed0"):
        shutil.rmtree(run / "checkpoints")
    res = snakemake(tmp_path, "-n", "--cores", "1")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "train" in res.stdout + res.stderr


def test_a_run_in_two_processes_keeps_the_global_batch_and_steps_and_resumes_after_a_kill(smoke_copy, smoke_config):
    """grpo.processes: 2 on this CPU: accelerate starts two gloo processes (hardex.launch); each takes half of
    a step's completions, so the global batch and the steps are the one-process run's. Killed mid-run (the
    job and both processes), the rerun resumes from the last checkpoint with the same two processes."""
    tmp_path = smoke_copy
    smoke_config["grpo"]["processes"] = 2
    run_dir = one_long_run(tmp_path, smoke_config)
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(tmp_path / "config.yaml"), "--cores", "2", "--rerun-incomplete",
           str(run_dir.relative_to(tmp_path) / "steps.parquet")]
    ckpt4 = run_dir / "checkpoints/checkpoint-4/trainer_state.json"
    # only the job's own process, as the OOM killer would: its launcher and both training processes (which
    # torch starts in sessions of their own) must go with it, not train on
    env = start_then_kill_job(cmd, tmp_path, r"train\.py", ckpt4.exists, "checkpoint-4")
    time.sleep(2)
    left = subprocess.run(["pgrep", "-f", f"hardex.train_worker {run_dir.relative_to(tmp_path)}"],
                          capture_output=True, text=True)
    assert not left.stdout.strip(), f"training processes outlived their job: {left.stdout}"
    killed_at = max(int(p.name.split("-")[1]) for p in (run_dir / "checkpoints").glob("checkpoint-*"))
    assert killed_at < 12

    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    log = (tmp_path / "logs/train/tiny/swaps/hard/seed0.log").read_text()
    assert re.search(r"resuming from \S+/checkpoints/checkpoint-\d+ \(\d+ steps recorded\)", log)
    assert "training in 2 processes (multi_gpu)" in log
    assert log.count("Loading weights") >= 2  # both processes loaded the model
    steps = pl.read_parquet(run_dir / "steps.parquet")
    assert steps["step"].to_list() == list(range(1, 13))  # the one-process run's steps, none twice
    per_step = smoke_config["grpo"]["prompts_per_step"] * smoke_config["grpo"]["num_generations"]
    assert (steps["rollouts_generated"] == per_step).all()  # the global batch: both processes' rollouts
    state = json.loads((run_dir / "checkpoints/checkpoint-12/trainer_state.json").read_text())
    assert state["train_batch_size"] == per_step // 2  # each process a half


def test_killed_probing_resumes_without_redoing_finished_chunks(tmp_path, smoke_config):
    cfg = smoke_config
    cfg["tasks"] = {"swaps": {"pool": "swaps/pool", "benchmarks": ["swaps/test"]}}
    cfg["datasets"]["swaps"]["splits"]["pool"]["n"] = 48
    cfg["probe"].update(k=16, chunk_size=8)  # 6 chunks, each a few seconds
    write_config(tmp_path, cfg)
    chunks = tmp_path / "results/probe/tiny/swaps.chunks"
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(tmp_path / "config.yaml"), "--cores", "1", "--rerun-incomplete",
           "results/probe/tiny/swaps.parquet"]
    env = start_then_kill_job(cmd, tmp_path, "probe.py", lambda: len(list(chunks.glob("*.counts.parquet"))) >= 2,
                              "two chunks")
    done = len(list(chunks.glob("*.counts.parquet")))
    assert 2 <= done < 6
    assert not (tmp_path / "results/probe/tiny/swaps.parquet").exists()
    for f in chunks.glob("*.parquet"):  # whatever looks finished is complete (writes are atomic)
        assert pl.read_parquet(f).height > 0

    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    log = (tmp_path / "logs/probe/tiny/swaps.log").read_text()
    assert log.count(": reused chunk") == done
    assert log.count(": probed ") == 6 - done
    probe = pl.read_parquet(tmp_path / "results/probe/tiny/swaps.parquet")
    assert probe.height == 48 and probe["id"].n_unique() == 48 and (probe["k"] == 16).all()


def test_device_run_stopped_at_its_limit_packs_what_exists_and_resumes(smoke_copy, smoke_config):
    """tools/device-run.sh (GPU hosts with a time limit per command): when its `timeout` fires, the
    jobs stop, what exists is packed, and the next call resumes training from the checkpoints."""
    import tarfile

    tmp_path = smoke_copy
    run_dir = one_long_run(tmp_path, smoke_config)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHON": sys.executable, "WHEELS": str(tmp_path / "none")}

    def call(limit, out):
        return [str(ROOT / "tools/device-run.sh"), str(limit), str(tmp_path / out), "-s", str(ROOT / "Snakefile"),
                "--configfile", "config.yaml", "--cores", "1", str(run_dir.relative_to(tmp_path) / "steps.parquet")]

    proc = subprocess.Popen(call(3600, "out1"), cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    ckpt4 = run_dir / "checkpoints/checkpoint-4/trainer_state.json"
    deadline = time.time() + 600
    while not ckpt4.exists():
        assert proc.poll() is None and time.time() < deadline, "no checkpoint-4"
        time.sleep(0.1)
    timer = subprocess.run(["pgrep", "-P", str(proc.pid), "-x", "timeout"], capture_output=True, text=True)
    os.kill(int(timer.stdout.split()[0]), signal.SIGINT)  # what the limit does, a little early
    assert proc.wait(timeout=120) != 0
    device = (tmp_path / "out1/device.txt").read_text()
    assert "no NVIDIA GPU" in device and "trl" in device and "snakemake exit status" in device
    with tarfile.open(tmp_path / "out1/report.tgz") as tar:
        assert "logs/train/tiny/swaps/hard/seed0.log" in tar.getnames()
    assert not (run_dir / "steps.parquet").exists() and ckpt4.exists()

    res = subprocess.run(call(600, "out2"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "snakemake exit status 0" in (tmp_path / "out2/device.txt").read_text()
    assert "resuming from" in (tmp_path / "logs/train/tiny/swaps/hard/seed0.log").read_text()
    assert pl.read_parquet(run_dir / "steps.parquet")["step"].to_list() == list(range(1, 13))
    with tarfile.open(tmp_path / "out2/results.tgz") as tar:
        names = tar.getnames()
    assert "results/train/tiny/swaps/hard/seed0/steps.parquet" in names
    assert "results/probe/tiny/swaps.parquet" in names and "results/probe/tiny/swaps.samples.parquet" not in names
    assert not (tmp_path / "out2/eval.tgz").exists()  # nothing evaluated yet: nothing packed, no error
