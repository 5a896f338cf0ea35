"""The smoke config through `--profile profiles/slurm` on a real single-node Slurm.

tools/slurm-cluster.sh installs Debian's packages if needed and starts munge, slurmctld and
slurmd; the fixture stops every daemon it started, also when the run fails. The test skips itself
(saying why) where that cannot work: not root, or the packages cannot be installed (exit code 3).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.support import ROOT, SMOKE

SCRIPT = ROOT / "tools" / "slurm-cluster.sh"
PROFILE = ROOT / "profiles" / "slurm"
# seconds; a hung Snakemake (e.g. one that lost its jobs' states) is killed, not waited for
RUN_TIMEOUT = int(os.environ.get("HARDEX_SLURM_TEST_TIMEOUT", "900"))

pytestmark = pytest.mark.slow


# GPUs the test node declares (a count, no devices): what GPU jobs ask Slurm for is checked on it
NODE_GPUS = 4


def _cluster(command: str, state: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HARDEX_SLURM_DIR": str(state), "HARDEX_SLURM_GPUS": str(NODE_GPUS)}
    return subprocess.run(
        ["bash", str(SCRIPT), command], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """A running single-node cluster (partition `debug`); its state dir, logs in <state>/log."""
    pytest.importorskip("snakemake_executor_plugin_slurm", reason="pip install 'hardex[slurm]'")
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("a Slurm cluster needs root (slurmctld and slurmd run as root, munged as munge)")
    state = tmp_path_factory.mktemp("slurm")
    try:
        res = _cluster("start", state)
        if res.returncode == 3:
            pytest.skip(f"no Slurm on this machine: {res.stderr.strip()}")
        assert res.returncode == 0, f"tools/slurm-cluster.sh start failed:\n{res.stdout}{res.stderr}"
        yield state
    finally:
        res = _cluster("stop", state)
        assert res.returncode == 0, f"tools/slurm-cluster.sh stop failed:\n{res.stdout}{res.stderr}"
        for name in ("munged", "slurmctld", "slurmd"):
            assert not (state / "pids" / name).exists(), f"{name} still recorded as running"


def _submissions(log: str) -> tuple[list[dict], list[dict]]:
    """(Slurm jobs, local jobs) from a Snakemake log, each with its rule and resources."""
    pending: dict[str, dict] = {}
    slurm, local = [], []
    block = re.compile(r"^(local)?rule (\w+):\n((?:    .*\n)+)", re.M)
    submitted = re.compile(r"^Job (\d+) has been submitted with SLURM jobid (\d+)", re.M)
    events = sorted(
        [(m.start(), "block", m) for m in block.finditer(log)]
        + [(m.start(), "submit", m) for m in submitted.finditer(log)],
        key=lambda e: e[0],
    )
    for _, kind, m in events:
        if kind == "block":
            body = m.group(3)
            job = {
                "rule": m.group(2),
                "jobid": re.search(r"jobid: (\d+)", body).group(1),
                "threads": int((re.search(r"threads: (\d+)", body) or [None, 1])[1]),
                "mem_mb": int((re.search(r"\bmem_mb=(\d+)", body) or [None, 0])[1]),
                "runtime": int((re.search(r"\bruntime=(\d+)", body) or [None, 0])[1]),
            }
            if m.group(1):
                local.append(job)
            else:
                pending[job["jobid"]] = job
        else:
            job = pending.pop(m.group(1))
            slurm.append({**job, "slurm_id": m.group(2)})
    assert not pending, f"jobs planned for Slurm but never submitted: {pending}"
    return slurm, local


def _minutes(limit: str) -> int:
    """Slurm's time limit ([D-]HH:MM:SS or MM:SS) in minutes."""
    days, _, rest = limit.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    h, m, s = parts
    return int(days or 0) * 1440 + h * 60 + m + (s > 0)


def _megabytes(mem: str) -> int:
    units = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
    return round(float(mem[:-1]) * units[mem[-1]]) if mem[-1] in units else int(mem)


def _job_environment() -> dict:
    """This environment without the Slurm variables of any job we run in; sbatch --export=ALL (the plugin's
    default) hands it to every job."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
    # HARDEX_ALLOW_CPU: the test node's GPU jobs run on its CPU (hardex.devices stops them otherwise)
    env.update(PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HARDEX_ALLOW_CPU="1")
    return env


def _through_slurm(workdir: Path, *targets: str) -> list[str]:
    """Snakemake on workdir's config.yaml through profiles/slurm, under a hard time limit."""
    return [
        "timeout", "--kill-after=20", str(RUN_TIMEOUT),
        sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
        "--configfile", str(workdir / "config.yaml"), "--profile", str(PROFILE),
        # the test node has nproc CPUs (tools/slurm-cluster.sh): a rule asking for more threads
        # would be refused at submission (EnforcePartLimits=ALL), so cap them as a site would
        "--max-threads", str(len(os.sched_getaffinity(0))),
        "--seconds-between-status-checks", "1",  # a test's jobs take seconds: ask often
        *targets,
    ]  # fmt: skip


def test_smoke_config_runs_through_slurm(slurm_cluster, tmp_path):
    """The smoke config through Slurm, every kind of job once, as a GPU config: each model job asks for a GPU
    (the test node's jobs then run on its CPU: HARDEX_ALLOW_CPU), and the train job, of grpo.processes 2, asks
    for 2 GPUs and 2 x run_threads CPUs as one task (accelerate starts the processes inside it). One run for
    both (CI time: Slurm's overhead is per job, and a second run repeated the first's jobs)."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    cfg = yaml.safe_load(SMOKE.read_text())
    cfg["selection"]["strategies"] = ["hard"]  # every kind of job, each once: Slurm's overhead is per job
    cfg["selection"]["online_strategies"] = []
    cfg["selection"]["controls"] = {}  # a control run is one more train and evaluate job of the same rules
    cfg["compute"] = {"gpu": 1, "run_threads": 1, "threads": 1}
    cfg["grpo"]["processes"] = 2
    (workdir / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = _job_environment()
    cmd = _through_slurm(workdir)
    log_path = tmp_path / "snakemake.log"
    start = time.monotonic()
    with log_path.open("w") as out:  # a file, not a pipe: a killed run cannot leave us waiting on it
        res = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir)
    elapsed = time.monotonic() - start
    log = log_path.read_text()
    print(f"smoke run through Slurm: {elapsed:.0f} s (rc {res.returncode})")
    # timeout: 124 after SIGTERM; -9 when Snakemake ignored it (SIGKILL to timeout's process group)
    timed_out = res.returncode in (124, 137, -9)
    assert not timed_out, f"Snakemake still running after {RUN_TIMEOUT} s, killed:\n{log[-5000:]}"
    assert res.returncode == 0, f"rc {res.returncode} after {elapsed:.0f} s:\n{log[-8000:]}"

    # every expected output
    for task in cfg["tasks"]:
        for m in cfg["models"]:
            expected = [f"results/probe/{m}/{task}.parquet", f"results/eval/{m}/base/{task}.parquet"]
            for s in cfg["selection"]["strategies"]:
                expected += [f"results/subsets/{m}/{task}/{s}/seed{seed}.parquet" for seed in cfg["seeds"]]
                expected += [f"results/eval/{m}/{task}/{s}/seed{seed}.parquet" for seed in cfg["seeds"]]
            missing = [p for p in expected if not (workdir / p).exists()]
            assert not missing, f"missing outputs: {missing}"

    # the jobs really went through Slurm, each with the resources Snakemake planned for it
    slurm_jobs, local_jobs = _submissions(log)
    submitted_rules = {j["rule"] for j in slurm_jobs}
    assert {"build_model", "probe", "train", "evaluate_run"} <= submitted_rules, submitted_rules
    run_id = re.search(r"SLURM run ID: (\S+)", log).group(1)
    fmt = "%i|%T|%m|%l|%C|%k"
    queue = subprocess.run(
        ["squeue", "-h", "-t", "all", "--name", run_id, "-o", fmt],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert queue.returncode == 0, queue.stderr
    seen = {}
    for line in queue.stdout.splitlines():
        jid, state, mem, limit, cpus, comment = line.strip().split("|")
        seen[jid] = dict(state=state, mem=mem, limit=limit, cpus=int(cpus), comment=comment)
    ctld_log = (slurm_cluster / "log" / "slurmctld.log").read_text()
    for job in slurm_jobs:
        sid, rule = job["slurm_id"], job["rule"]
        assert f"JobId={sid} " in ctld_log, f"slurmctld never saw job {sid} ({rule})"
        assert sid in seen, f"Slurm job {sid} ({rule}) is not in squeue: {queue.stdout}"
        q = seen[sid]
        assert q["state"] == "COMPLETED", f"Slurm job {sid} ({rule}): {q}"
        assert q["comment"].startswith(f"rule_{rule}"), q
        assert q["cpus"] == job["threads"], f"{rule}: {job['threads']} threads, {q['cpus']} CPUs"
        assert _megabytes(q["mem"]) == job["mem_mb"], f"{rule}: mem_mb {job['mem_mb']}, --mem {q['mem']}"
        assert _minutes(q["limit"]) == job["runtime"], f"{rule}: runtime {job['runtime']}, -t {q['limit']}"
    print(f"{len(slurm_jobs)} Slurm jobs ({sorted(submitted_rules)}), {len(local_jobs)} local")
    asked = {}
    for job in slurm_jobs:
        spec = subprocess.run(["scontrol", "show", "job", job["slurm_id"]], capture_output=True, text=True,
                              timeout=60).stdout
        asked[job["rule"]] = {
            "gpus": int((re.search(r"gres[:/]gpu[:=](\d+)", spec) or [None, 0])[1]),  # TresPerJob=gres:gpu:2
            "cpus": int(re.search(r"NumCPUs=(\d+)", spec).group(1)),
            "tasks": int(re.search(r"NumTasks=(\d+)", spec).group(1)),
        }
    print("what each rule asked Slurm for:", asked)
    assert asked["train"] == {"gpus": 2, "cpus": 2, "tasks": 1}, asked["train"]
    assert asked["probe"]["gpus"] == 1 and asked["build_model"]["gpus"] == 1
    train_log = (workdir / "logs/train/tiny/swaps/hard/seed0.log").read_text()
    assert "as Slurm gave them" in train_log and "training in 2 processes (multi_gpu)" in train_log

    # a Slurm run leaves a finished workflow behind: nothing to do for a local dry run
    dry = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
         "--configfile", str(workdir / "config.yaml"), "-n", "--cores", "1"],
        capture_output=True, text=True, env=env, cwd=workdir, timeout=300,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "Nothing to be done" in dry.stdout + dry.stderr, (dry.stdout + dry.stderr)[-3000:]


def test_a_partition_the_cluster_lacks_is_refused_at_planning(slurm_cluster, tmp_path):
    """Under profiles/slurm each slurm_partition is checked against the cluster's (sinfo) while planning: a
    misspelt one stops the dry run in one line naming its key and the cluster's partitions, before any job;
    `debug`, the cluster's one (and default) partition, passes. A dry run submits nothing (hardex.cluster)."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "config.yaml").write_text(SMOKE.read_text())

    def dry_run(partition: str) -> tuple[int, str]:
        cmd = _through_slurm(workdir, "-n", "--set-resources", f"train:slurm_partition={partition}")
        res = subprocess.run(cmd, capture_output=True, text=True, env=_job_environment(), cwd=workdir, timeout=300)
        return res.returncode, res.stdout + res.stderr

    rc, out = dry_run("debgu")
    assert rc == 1, out[-3000:]
    errors = [line for line in out.splitlines() if line.startswith("hardex: slurm error")]
    assert errors == ["hardex: slurm error: set-resources: train: slurm_partition 'debgu' is not a partition of "
                      "this cluster; its partitions (sinfo): debug"], out[-3000:]
    assert not (workdir / "results").exists()

    rc, out = dry_run("debug")
    assert rc == 0, out[-3000:]
    assert "hardex: slurm error" not in out and "Slurm partitions not checked" not in out
    assert "slurm_partition=debug" in out  # the train jobs would ask for it
