"""hardex.devices: a GPU job's own GPUs, claimed from the node's by a lock per GPU (real flock, real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from hardex.devices import claim_gpus, node_gpus
from tests.support import ROOT


@pytest.fixture
def node(monkeypatch, tmp_path):
    """A fake node of four GPUs with its own lock folder; CUDA_VISIBLE_DEVICES restored after the test."""
    monkeypatch.setenv("HARDEX_GPUS", "0,1,2,3")
    monkeypatch.setenv("HARDEX_GPU_LOCKS", str(tmp_path / "locks"))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    return tmp_path


def test_the_node_lists_its_gpus_from_the_environment(monkeypatch):
    monkeypatch.setenv("HARDEX_GPUS", "2, 5,7")
    assert node_gpus() == ["2", "5", "7"]
    monkeypatch.delenv("HARDEX_GPUS")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    assert node_gpus() == ["1", "3"]


def test_jobs_get_distinct_gpus_and_see_only_their_own(node):
    with claim_gpus(1, log=lambda _: None) as a:
        assert os.environ["CUDA_VISIBLE_DEVICES"] == a[0]
        with claim_gpus(2, log=lambda _: None) as b:
            assert os.environ["CUDA_VISIBLE_DEVICES"] == ",".join(b)
            assert len(b) == 2 and not set(a) & set(b)
    with claim_gpus(4, log=lambda _: None) as every:  # all released at the end of their blocks
        assert every == ["0", "1", "2", "3"]


def test_a_job_waits_for_a_gpu_that_another_holds(node):
    lines = []
    with claim_gpus(4, log=lambda _: None):
        got = []
        waiter = threading.Thread(target=lambda: got.append(_claim_one(lines)))
        waiter.start()
        time.sleep(1.0)
        assert not got and any("waiting for 1 free GPU" in line for line in lines)
    waiter.join(timeout=10)
    assert got and got[0] in {"0", "1", "2", "3"}


def _claim_one(lines):
    with claim_gpus(1, log=lines.append) as gpus:
        return gpus[0]


def test_a_killed_job_gives_its_gpus_back(node):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from hardex.devices import claim_gpus\n"
         "with claim_gpus(4, log=lambda _: None) as g:\n    print(','.join(g), flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert holder.stdout.readline().strip() == "0,1,2,3"
    os.kill(holder.pid, signal.SIGKILL)  # no cleanup runs: the kernel drops the locks
    holder.wait()
    t0 = time.time()
    with claim_gpus(4, log=lambda _: None) as gpus:
        assert gpus == ["0", "1", "2", "3"] and time.time() - t0 < 2


def test_asking_for_more_gpus_than_the_node_has_fails_at_once(node):
    with pytest.raises(RuntimeError, match=r"asks for 5 GPU\(s\) \(compute.gpu\) but this node has 4"):
        with claim_gpus(5, log=lambda _: None):
            pass


def test_under_slurm_the_allocation_is_used_as_given(node, monkeypatch):
    monkeypatch.delenv("HARDEX_GPUS")  # Slurm gave this job exactly its GPU (one sbatch per job)
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with claim_gpus(1, log=lambda _: None) as gpus:
        assert gpus == ["3"] and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    assert not (node / "locks").exists()  # nothing claimed


def test_jobs_share_a_gpu_when_the_node_says_so(node, monkeypatch):
    monkeypatch.setenv("HARDEX_GPUS", "0")
    monkeypatch.setenv("HARDEX_JOBS_PER_GPU", "3")
    with claim_gpus(1, log=lambda _: None) as a, claim_gpus(1, log=lambda _: None) as b, \
            claim_gpus(1, log=lambda _: None) as c:
        assert a == b == c == ["0"]
        lines = []
        got = []
        waiter = threading.Thread(target=lambda: got.append(_claim_one(lines)))
        waiter.start()
        time.sleep(1.0)
        assert not got  # a fourth job waits for one of the three shares
    waiter.join(timeout=10)
    assert got == ["0"]
