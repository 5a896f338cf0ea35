"""GPU assignment through the real workflow: Snakemake runs the smoke config's GPU jobs four at a time on a
fake node of four GPUs (HARDEX_GPUS), and every job's log says which GPUs it held and when (hardex.devices).
No two jobs that ran at the same time shared a GPU, and every GPU was used."""

from __future__ import annotations

import itertools
import re
from datetime import datetime

import yaml

from tests.support import SMOKE, snakemake

CLAIM = re.compile(r"\[hardex\] (\S+) GPUs (\S+) (claimed|released)")


def held_intervals(logs) -> list[tuple[str, datetime, datetime, set[str]]]:
    """(log, claimed at, released at, GPUs) of every job log that claimed GPUs."""
    out = []
    for log in logs:
        events = {kind: (datetime.fromisoformat(at), set(gpus.split(","))) for at, gpus, kind in
                  CLAIM.findall(log.read_text())}
        if events:
            (start, gpus), (end, _) = events["claimed"], events["released"]
            out.append((log.name, start, end, gpus))
    return out


def test_concurrent_gpu_jobs_never_share_a_gpu_and_every_gpu_is_used(tmp_path, monkeypatch):
    cfg = yaml.safe_load(SMOKE.read_text())
    cfg["compute"] = {"gpu": 1, "threads": 1, "run_threads": 1}
    cfg["selection"].pop("controls")
    # 4 runs (hard, easy, random, hard_online): 4 train and 4 evaluate_run jobs besides build and probe
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    monkeypatch.setenv("HARDEX_GPUS", "0,1,2,3")
    monkeypatch.setenv("HARDEX_ALLOW_CPU", "1")  # the fake node's GPU jobs run on this CPU (hardex.devices)
    monkeypatch.setenv("HARDEX_GPU_LOCKS", str(tmp_path / "locks"))
    # forked: ten jobs' imports (about 10 CPU-seconds each here) would take most of the test; the GPU claims
    # happen in each job's own process either way (hardex.devices)
    res = snakemake(tmp_path, "--cores", "4", "--resources", "gpu=4", "--until", "evaluate_run", forked=True)
    assert res.returncode == 0, res.stderr[-4000:]
    jobs = held_intervals((tmp_path / "logs").rglob("*.log"))
    assert len(jobs) == 10  # build, probe, 4 train and 4 evaluate_run jobs
    assert all(len(gpus) == 1 for *_, gpus in jobs)
    overlapping = [(a, b) for a, b in itertools.combinations(jobs, 2) if a[1] < b[2] and b[1] < a[2]]
    assert overlapping, "no two GPU jobs ran at once: the test would show nothing"
    for a, b in overlapping:
        assert not a[3] & b[3], f"{a[0]} and {b[0]} held GPU {a[3] & b[3]} at the same time"
    assert set().union(*(gpus for *_, gpus in jobs)) == {"0", "1", "2", "3"}
