"""Helpers the tests share (fixtures are in conftest.py): the repository's paths, Snakemake's own CLI on
this Snakefile, result files in the workflow's layout, and a tiny built model."""

from __future__ import annotations

import atexit
import copy
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path

import polars as pl
import yaml

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "tests" / "configs" / "smoke.yaml"
# the built tiny model's config (the former default): the base of test configs that need no model package
BUILT_CONFIG = ROOT / "experiments" / "cpu_tiny.yaml"


# what a test's Snakemake run adds to the environment: this checkout's library, no hub
RUN_ENV = {"PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def snakemake(workdir: Path, *args: str, configfile: Path | None = None, timeout: int = 900, forked: bool = False,
              env: dict[str, str] | None = None):
    """Run Snakemake's own CLI on this repo's Snakefile with results under `workdir`. `forked`: its script jobs
    fork from this test process's fork server (`forkserver`), for tests of what the graph runs; the shared
    smoke run and the tests of determinism, resuming after a kill and Slurm run every job in a fresh interpreter,
    as a user's run does (Snakemake's benchmark of a forked job measures its launcher, not the job: the smoke
    run's compute table is tested). `env`: more of the environment, over RUN_ENV's."""
    env = {**os.environ, **RUN_ENV, **(env or {})}
    python = [sys.executable, "-m", "snakemake"]
    if forked:
        from hardex.forkserver import SOCKET_ENV, snakemake_command

        launcher, server_env = forkserver()
        python, env = snakemake_command(launcher), {**env, SOCKET_ENV: server_env[SOCKET_ENV]}
    cmd = [*python, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(configfile or workdir / "config.yaml"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=workdir)


_servers = ExitStack()
atexit.register(_servers.close)


@functools.cache
def forkserver() -> tuple[Path, dict[str, str]]:
    """One fork server per test process, in the environment `snakemake` gives its runs, started at first use
    (its imports cost about 5 CPU-seconds, which each forked job then saves) and stopped when the process exits."""
    from hardex.forkserver import started

    return _servers.enter_context(started(env={**os.environ, **RUN_ENV}))


def finished_run(tmp_path_factory, name: str, config: Path, forked: bool = False) -> Path:
    """A workflow run of `config` to its end, once per test session, in a folder named `name`; `forked` as for
    `snakemake` (a job's imports cost about 10 CPU-seconds on an AVX2 machine of CI's kind, most of a tiny job).
    Under pytest -n the workers share it: the first that needs it runs it, the others wait for it."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the folder every worker's base folder is in
    workdir = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        if not (shared / f"{name}.finished").exists():
            shutil.rmtree(workdir, ignore_errors=True)
            workdir.mkdir()
            shutil.copy(config, workdir / "config.yaml")
            res = snakemake(workdir, "--cores", "2", forked=forked)
            assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
            (workdir / "snakemake.stderr").write_text(res.stderr)  # what the run printed, for tests to read
            (shared / f"{name}.finished").touch()
    return workdir


def write_config(workdir: Path, cfg: dict) -> Path:
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def with_key(cfg: dict, path: str, value) -> dict:
    """cfg with the key at dotted `path` set to value (or deleted when value is ...)."""
    cfg = copy.deepcopy(cfg)
    *parents, last = path.split(".")
    node = cfg
    for p in parents:
        node = node[p]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return cfg


def stub_hub_cache(cache: Path, repo_ids) -> Path:
    """A hub cache holding only each model's config.json: what the planning check of a hub model looks for
    while offline (hardex.model_sources). No job could load these models."""
    for repo in repo_ids:
        folder = cache / f"models--{repo.replace('/', '--')}"
        snapshot = folder / "snapshots" / ("0" * 40)
        snapshot.mkdir(parents=True, exist_ok=True)
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / "main").write_text("0" * 40)
        (snapshot / "config.json").write_text("{}")
    return cache


# ---- a tiny result tree in the workflow's layout ------------------------------------------------------
# Two models, tasks t1 (test + ood benchmark, tiers) and t2 (test only), five strategies, 10 test
# examples. Accuracies are set exactly (the first round(acc * N) examples are correct), so every
# table value below is known in advance.
N_TEST, N_OOD, N_POOL = 10, 8, 20
BASE_ACC = {"m1": 0.3, "m2": 0.5}
FINAL_ACC = {"hard": 0.8, "easy": 0.4, "random": 0.6, "base_wrong": 0.7, "base_right": 0.5}
ZERO_STD = {"hard": 0.25, "easy": 0.875, "random": 0.5, "base_wrong": 0.375, "base_right": 0.75}
STRATEGIES = list(FINAL_ACC)
BENCHMARKS = {"t1": ["t1/test", "t1/ood"], "t2": ["t2/test"]}
PASS_K = {"t1/test": [1], "t1/ood": [1, 4], "t2/test": [1]}


def outcomes(step: int, bench: str, acc: float, n: int, n_ex: int) -> pl.DataFrame:
    k = round(acc * n_ex)
    return pl.DataFrame({
        "step": [step] * n_ex,
        "id": [f"{bench}-{i}" for i in range(n_ex)],
        "tier": [str(1 + i % 3) for i in range(n_ex)],
        "n": [n] * n_ex,
        "n_correct": [n if i < k else 0 for i in range(n_ex)],
        "completions": [["x"] * n for _ in range(n_ex)],
        "benchmark": [bench] * n_ex,
    })


def bench_frames(step: int, task: str, acc: float) -> pl.DataFrame:
    frames = [outcomes(step, BENCHMARKS[task][0], acc, 1, N_TEST)]
    if len(BENCHMARKS[task]) > 1:  # OOD: 4 samples; correct examples get 2 of 4 right
        ood = outcomes(step, BENCHMARKS[task][1], acc, 4, N_OOD)
        frames.append(ood.with_columns((pl.col("n_correct") // 2).alias("n_correct")))
    return pl.concat(frames)


def write_results(root: Path, seeds=(0,), seed_shift: float = 0.1) -> dict:
    """Write probe, subset, steps and eval files for every model x task x strategy x seed.

    Seed s shifts the final accuracy by s * seed_shift (so several seeds have a spread)."""
    files = {"evals": [], "bases": [], "steps": [], "probes": [], "subsets": []}
    for model, base_acc in BASE_ACC.items():
        for task in BENCHMARKS:
            base = root / f"results/eval/{model}/base/{task}.parquet"
            base.parent.mkdir(parents=True, exist_ok=True)
            bench_frames(0, task, base_acc).write_parquet(base)
            files["bases"].append(base)
            probe = root / f"results/probe/{model}/{task}.parquet"
            probe.parent.mkdir(parents=True, exist_ok=True)
            rates = [(i % 5) / 4 for i in range(N_POOL)]  # K = 4: four of each pass rate
            pl.DataFrame({"id": [f"p{i}" for i in range(N_POOL)], "k": [4] * N_POOL,
                          "n_correct": [int(r * 4) for r in rates], "pass_rate": rates,
                          "greedy_correct": [r > 0.5 for r in rates],
                          "tier": ["1"] * N_POOL}).write_parquet(probe)
            files["probes"].append(probe)
            for strategy in STRATEGIES:
                sub = root / f"results/subsets/{model}/{task}/{strategy}/seed0.parquet"
                sub.parent.mkdir(parents=True, exist_ok=True)
                ids = {"hard": [0, 5], "easy": [4, 9], "random": [1, 7], "base_wrong": [0, 1, 2],
                       "base_right": [3, 4, 8]}[strategy]
                pl.DataFrame({"id": [f"p{i}" for i in ids], "pass_rate": [rates[i] for i in ids],
                              "rank": list(range(len(ids)))}).write_parquet(sub)
                files["subsets"].append(sub)
                for seed in seeds:
                    run = root / f"results/train/{model}/{task}/{strategy}/seed{seed}/steps.parquet"
                    run.parent.mkdir(parents=True, exist_ok=True)
                    z = ZERO_STD[strategy]
                    pl.DataFrame({"step": [1, 2, 3, 4], "reward_mean": [0.5] * 4, "reward_std": [0.1] * 4,
                                  "frac_zero_std": [z - 0.125, z + 0.125, z - 0.125, z + 0.125],
                                  "loss": [0.0] * 4, "kl": [None] * 4, "completion_length": [10.0] * 4,
                                  "learning_rate": [1e-4] * 4, "step_time": [0.1] * 4},
                                 schema_overrides={"kl": pl.Float64}).write_parquet(run)
                    files["steps"].append(run)
                    ev = root / f"results/eval/{model}/{task}/{strategy}/seed{seed}.parquet"
                    ev.parent.mkdir(parents=True, exist_ok=True)
                    final = FINAL_ACC[strategy] + seed * seed_shift
                    mid = (base_acc + final) / 2
                    pl.concat([bench_frames(2, task, mid), bench_frames(4, task, final)]).write_parquet(ev)
                    files["evals"].append(ev)
    return files


# ---- a tiny built model ------------------------------------------------------------------------------

ARCH = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 2, "num_heads": 2, "vocab_size": 320,
        "max_position_embeddings": 512}


@functools.lru_cache(maxsize=None)
def tiny_model_dir() -> str:
    """A tiny Qwen3 warm-started on both synthetic families, built once per process."""
    from hardex.models import build_model, warmstart_rows
    from hardex.tasks import get_task

    rows = []
    for family, spec in {"arith": {"name": "sft", "n": 64, "seed": 4, "difficulty": [1, 3]},
                         "swaps": {"name": "sft", "n": 64, "seed": 4, "difficulty": [0, 2], "people": [3, 3]}}.items():
        task = get_task(family)
        rows += warmstart_rows(task, task.load_split(spec))
    out = Path(tempfile.mkdtemp(prefix="hardex-tiny-"))
    build_model(out, rows, ARCH, {"epochs": 0.5, "batch_size": 16, "learning_rate": 1e-2, "seed": 0},
                log=lambda *a: None)
    return str(out)


def build_swaps_model(out: Path, hidden_size: int, epochs: int = 1) -> Path:
    """A 2-layer Qwen3 of `hidden_size`, warm-started `epochs` epochs on easy swaps: the fixtures' tiny models
    (head size hidden_size / 2: vLLM's CPU attention takes 64, not 16)."""
    from hardex.models import build_model, warmstart_rows
    from hardex.tasks import get_task

    task = get_task("swaps")
    rows = warmstart_rows(task, task.load_split({"name": "sft", "n": 64, "seed": 0, "difficulty": [0, 2]}))
    arch = {"hidden_size": hidden_size, "intermediate_size": 2 * hidden_size, "num_layers": 2, "num_heads": 2,
            "vocab_size": 320, "max_position_embeddings": 256}
    build_model(out, rows, arch, {"seed": 0, "batch_size": 16, "epochs": epochs, "learning_rate": 5e-3},
                log=lambda *a: None)
    return out


@contextmanager
def one_torch_thread():
    """torch at one thread inside the block, then as it was: the thread count is process-wide, and a test that left
    it changed would change the arithmetic of every later test in its pytest worker."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
