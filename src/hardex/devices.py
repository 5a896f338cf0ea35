"""Which GPUs a model job uses: its own, chosen without collision from the node's.

Snakemake counts GPUs (`--resources gpu=N` caps how many GPU jobs run at once) but gives a job no GPU
ids (its issue #281), so every job would see every GPU and run on GPU 0. `claim_gpus(n)` gives a job
n of the node's GPUs that no other running job holds, and makes them the only ones it sees
(`CUDA_VISIBLE_DEVICES`, set before CUDA starts). A claim is an exclusive `flock` on one file per GPU
in a node-local folder: the kernel drops it when the process ends, however it ends, so a crashed job
never keeps a GPU, and jobs of two workflows on one node do not collide either.

The node's GPUs: `HARDEX_GPUS` (a comma list of ids, e.g. to leave some out; the tests' fake node),
else `CUDA_VISIBLE_DEVICES` when set, else the GPUs `nvidia-smi -L` lists. `HARDEX_JOBS_PER_GPU` = k
lets k jobs share each GPU (small models, whose steps are bound by Python rather than the GPU:
experiments/gpu_mini.yaml); a job of several GPUs never takes two shares of one. Under Slurm
(SLURM_JOB_ID set) a job given exactly its GPUs (one sbatch per job: profiles/slurm) uses them as given;
a job inside a larger allocation (Snakemake run in an `salloc` or `sbatch` of a node's 8 GPUs) claims its
own among the allocation's, with locks kept per allocation (Slurm numbers each allocation's GPUs from 0).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterator

#: how often a job that found too few free GPUs looks again
POLL_SECONDS = 0.5


def node_gpus() -> list[str]:
    """The ids of this node's GPUs (see the module's docstring); [] without any."""
    listed = os.environ.get("HARDEX_GPUS") or os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def lock_folder() -> Path:
    """Where the per-GPU lock files live: node-local, shared by every job and workflow of one user."""
    folder = Path(os.environ.get("HARDEX_GPU_LOCKS") or Path(tempfile.gettempdir()) / f"hardex-gpus-{os.getuid()}")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _stamp() -> str:
    return datetime.now().isoformat(timespec="milliseconds")


@contextlib.contextmanager
def claim_gpus(n: int, log: Callable[[str], None] = print) -> Iterator[list[str]]:
    """Hold n of the node's GPUs for the `with` block, visible to this process only; yields their ids.

    n = 0 (a CPU job) claims nothing and changes nothing. Under Slurm the allocation's GPUs are used as
    given. A job that finds fewer than n free GPUs waits for them (another workflow on the node may hold
    them); one that asks for more than the node has fails at once.
    """
    if n <= 0:
        yield []
        return
    slurm = os.environ.get("SLURM_JOB_ID")
    gpus = node_gpus()
    if slurm and len(gpus) <= n:  # Slurm gave this job its GPUs: use them as given
        given = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        log(f"[hardex] {_stamp()} GPUs {given or 'none'}: as Slurm gave them")
        yield [g for g in given.split(",") if g]
        return
    if len(gpus) < n:
        raise RuntimeError(f"this job asks for {n} GPU(s) (compute.gpu) but this node has {len(gpus)} "
                           f"({', '.join(gpus) or 'none'}; HARDEX_GPUS or CUDA_VISIBLE_DEVICES name them)")
    folder = lock_folder() / f"slurm-{slurm}" if slurm else lock_folder()  # an allocation's own ids
    folder.mkdir(parents=True, exist_ok=True)
    shares = max(1, int(os.environ.get("HARDEX_JOBS_PER_GPU") or 1))
    held: dict[str, int] = {}
    waited = False
    try:
        while len(held) < n:
            for share, gpu in itertools.product(range(shares), gpus):
                if gpu in held or len(held) == n:
                    continue
                fd = os.open(folder / f"gpu{gpu}.{share}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                held[gpu] = fd
            if len(held) < n:
                # free what we hold while we wait: two jobs each holding half of what both need would wait forever
                for fd in held.values():
                    os.close(fd)
                held.clear()
                if not waited:
                    log(f"[hardex] {_stamp()} waiting for {n} free GPU(s) of {', '.join(gpus)}")
                    waited = True
                time.sleep(POLL_SECONDS)
        claimed = sorted(held, key=gpus.index)
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(claimed)
        log(f"[hardex] {_stamp()} GPUs {','.join(claimed)} claimed")
        yield claimed
    finally:
        for fd in held.values():
            os.close(fd)  # closing the file drops its lock
        if held:
            log(f"[hardex] {_stamp()} GPUs {','.join(sorted(held, key=gpus.index))} released")
