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

`gpu_job(n)` is a model job's whole GPU setup (entered by `workflow.job_log`): the claim; a stop, with the
driver's and torch's CUDA versions, when torch cannot use the GPUs claimed (`require_cuda`: a GPU job never
falls back to the CPU silently, where it would run for days on the 1-2 CPUs Slurm gives it;
HARDEX_ALLOW_CPU=1 lets it, to rehearse a GPU config on a machine without one); and, where k jobs
share each card, torch's allocator capped at the job's 1/k less its CUDA context, on the GPUs the process
computes on (`gpu_share`, `hold_to_share`, `allocator_fraction`; a vLLM engine is sized from the same share,
hardex.generation.vllm_backend). None of it starts CUDA in the job's process: a
vLLM engine started later starts processes of its own, and a vllm-server run narrows its GPUs first.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterator

#: how often a job that found too few free GPUs looks again
POLL_SECONDS = 0.5
#: set to 1, a GPU job whose torch sees no CUDA runs on the CPU instead of stopping (a rehearsal of a GPU config
#: on a machine without one; the tests' fake node)
ALLOW_CPU_ENV = "HARDEX_ALLOW_CPU"


def node_gpus() -> list[str]:
    """The ids of this node's GPUs (see the module's docstring); [] without any."""
    listed = os.environ.get("HARDEX_GPUS") or os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip() and g.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def cuda_available() -> bool:
    """torch.cuda.is_available() without starting CUDA's driver in this process: torch's NVML-based check
    (PYTORCH_NVML_BASED_CUDA_CHECK=1), which reads CUDA_VISIBLE_DEVICES at each call. torch's default check
    calls cuInit, after which the driver ignores a CUDA_VISIBLE_DEVICES narrowed later (a vllm-server run's
    training GPUs) and a forked process cannot use CUDA (vLLM's workers)."""
    import torch

    saved = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        return torch.cuda.is_available()
    finally:
        if saved is None:
            del os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"]
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = saved


def pick_device(device: str | None = None) -> str:
    """`device` where given (not auto), else cuda where torch can use a GPU, else cpu (cuda_available)."""
    if device and device != "auto":
        return device
    return "cuda" if cuda_available() else "cpu"


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
    shares = jobs_per_gpu()
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
        log(f"[hardex] {_stamp()} GPUs {','.join(claimed)} claimed" + (f", 1/{shares} of each" if shares > 1 else ""))
        yield claimed
    finally:
        for fd in held.values():
            os.close(fd)  # closing the file drops its lock
        if held:
            log(f"[hardex] {_stamp()} GPUs {','.join(sorted(held, key=gpus.index))} released")


def jobs_per_gpu() -> int:
    """k of HARDEX_JOBS_PER_GPU: how many jobs share each GPU (1 when unset)."""
    return max(1, int(os.environ.get("HARDEX_JOBS_PER_GPU") or 1))


def gpu_share() -> float:
    """The share of each of its GPUs a job may use: 1/k where k jobs share each card. Read from the environment,
    so the job's child processes (accelerate's ranks, a vLLM server) have it too, and so do k jobs run in one
    Slurm allocation of one GPU (claim_gpus leaves the GPUs as Slurm gave them there)."""
    return 1 / jobs_per_gpu()


#: what one process's CUDA context holds on a card, outside torch's allocator and so outside its cap: 0.4-0.5 GiB
#: measured on H100s (issue 64 G4); the larger, so that k jobs' caps and contexts together fit the card
CUDA_CONTEXT_BYTES = 512 * 2**20


def allocator_fraction(share: float, total_bytes: int, context_bytes: int = CUDA_CONTEXT_BYTES) -> float:
    """The fraction of a card of `total_bytes` that torch's allocator may take for a job given `share` of it: the
    share less the job's CUDA context, which the cap does not count (k jobs capped at 1/k each overran the card
    by k contexts). 1 for a card of its own."""
    if share >= 1:
        return 1.0
    fraction = share - context_bytes / total_bytes
    if fraction <= 0:
        raise ValueError(f"HARDEX_JOBS_PER_GPU leaves each job {share * total_bytes / 2**30:.2f} GiB of its GPU, no "
                         f"more than its CUDA context ({context_bytes / 2**30:.1f} GiB): share each card among fewer")
    return fraction


def own_devices(device_count: int) -> list[int]:
    """The GPUs this process computes on: its own where it is one of accelerate's ranks (LOCAL_RANK: every rank sees
    all the job's GPUs, and capping one starts a CUDA context there), else every GPU it sees."""
    rank = os.environ.get("LOCAL_RANK")
    return [int(rank)] if rank is not None and rank.isdigit() else list(range(device_count))


def hold_to_share(share: float | None = None) -> float:
    """Cap this process's CUDA allocator at `share` (default: gpu_share) of each GPU it computes on, less its CUDA
    context (allocator_fraction), torch's per-process memory fraction, from the moment CUDA starts: an allocation
    past the job's slice then fails in this job, not in the job beside it on the card. Queued until CUDA starts,
    not applied now: applying it starts CUDA, which a vLLM engine started later could not fork past. Returns the
    share."""
    share = gpu_share() if share is None else float(share)
    if share >= 1:
        return 1.0
    import torch

    def cap():
        for i in own_devices(torch.cuda.device_count()):
            fraction = allocator_fraction(share, torch.cuda.get_device_properties(i).total_memory)
            torch.cuda.set_per_process_memory_fraction(fraction, i)

    # torch's own queue of settings for the first CUDA use (private, unchanged since torch 1.x)
    torch.cuda._lazy_call(cap)
    return share


#: a vLLM engine's memory share on each device when generation.vllm.gpu_memory_utilization is null (on a GPU,
#: of the job's share of it: memory_utilization). On CPU vLLM reads it as a share of the host's (NUMA node's)
#: memory, most of which the other processes of a job already hold.
MEMORY_SHARE = {"cuda": 0.9, "cpu": 0.3}
#: the same for an engine colocated with a trainer in one job (grpo.rollouts: vllm): on a GPU the
#: policy, its gradients and optimizer state need the rest; TRL's colocate mode defaults to 0.3 too
COLOCATED_MEMORY_SHARE = {"cuda": 0.3, "cpu": 0.3}


def memory_utilization(configured: float | None, device: str = "cuda", colocated: bool = False,
                       gpu_share: float = 1.0) -> float:
    """vLLM's gpu_memory_utilization for one engine, in-process or a server's: the configured value, or the
    device's default scaled to the job's share of its GPU. vLLM reads it as a share of the whole card for this
    one engine and fills it with KV cache, so a configured value above the job's share is refused."""
    share = float(gpu_share) if device == "cuda" else 1.0
    if configured is None:
        return (COLOCATED_MEMORY_SHARE if colocated else MEMORY_SHARE)[device] * share
    if configured > share:
        raise ValueError(f"generation.vllm.gpu_memory_utilization {configured:g} is more than this job's "
                         f"share of its GPU, {share:.4g} (HARDEX_JOBS_PER_GPU jobs share each card): set it to "
                         f"{share:.4g} or less, or null for {MEMORY_SHARE['cuda']:g} of the share")
    return float(configured)


class NoCudaError(RuntimeError):
    """A GPU job whose torch cannot use a GPU; str() names the driver, torch's CUDA and what to do."""


#: run in a child process: torch.cuda.is_available() starts CUDA's driver in the process that asks
_CUDA_PROBE = """
import json, warnings
import torch
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "gpus": gpus,
                  "warning": " ".join(str(w.message).strip() for w in seen if "CUDA" in str(w.message))}))
"""


def cuda_status() -> dict:
    """What this job's torch sees of CUDA with the job's GPUs (CUDA_VISIBLE_DEVICES): its version, the CUDA
    version it was built for (None: a CPU build), the GPUs it can use and the warning it gave, if any. Asked
    in a child process, so this process does not start CUDA (see the module docstring)."""
    try:
        done = subprocess.run([sys.executable, "-c", _CUDA_PROBE], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise NoCudaError(f"torch did not say in 10 minutes whether it can use CUDA ({sys.executable})") from None
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise NoCudaError(f"could not ask torch about CUDA ({sys.executable}): {done.stderr.strip()[-500:]}") from None


def driver_status() -> dict:
    """The NVIDIA driver's version and the newest CUDA it runs, as nvidia-smi prints them; {} without one."""
    if shutil.which("nvidia-smi") is None:
        return {}
    try:
        out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {key: re.search(rf"{label}:\s*([\d.]+)", out) for key, label in
             (("driver", "Driver Version"), ("cuda", "CUDA Version"))}
    return {key: m.group(1) for key, m in found.items() if m}


def require_cuda(n: int, log: Callable[[str], None] = print) -> None:
    """Stop a job that asked for n GPUs (compute.gpu) and whose torch cannot use them, with one message: the
    driver (nvidia-smi), torch and the CUDA it was built for, and what to do. Without this the job would run
    on the CPU. HARDEX_ALLOW_CPU=1 lets it (a GPU config rehearsed on a machine without a GPU)."""
    if os.environ.get(ALLOW_CPU_ENV) == "1":
        log(f"[hardex] {ALLOW_CPU_ENV}=1: this GPU job runs on the CPU where torch sees no GPU")
        return
    status = cuda_status()
    if status["gpus"] >= n:
        return
    driver = driver_status()
    built = f"torch {status['torch']} (torch.version.cuda {status['cuda']})"
    runs = f"NVIDIA driver {driver.get('driver', '?')}, which runs CUDA {driver.get('cuda', '?')} at most (nvidia-smi)"
    if not driver:
        has, fix = "no NVIDIA driver answers on this node (nvidia-smi)", "run it on a node with a GPU and its driver"
    elif status["cuda"] is None:
        has = f"{built} is a CPU build; {runs}"
        fix = "install a CUDA build of torch for this driver (https://pytorch.org/get-started/locally)"
    elif _version(status["cuda"]) > _version(driver.get("cuda", "0")):
        has = f"{built} is built for a newer CUDA than the {runs}"
        fix = f"install a torch built for CUDA {driver.get('cuda', '?')} or older, or update the driver"
    else:
        has = f"{built} with {runs}"
        fix = (f"check that the GPUs it was given (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}) "
               f"are there and free (nvidia-smi)")
    seen = f"torch sees {status['gpus']} GPU(s)" + (f" ({status['warning']})" if status["warning"] else "")
    raise NoCudaError(f"this job asks for {n} GPU(s) (compute.gpu) but {seen}: {has}. It would run on the CPU "
                      f"instead, for hours or days: {fix}; or set compute.gpu: 0 to plan it for the CPU "
                      f"({ALLOW_CPU_ENV}=1 runs GPU jobs on the CPU anyway)")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


@contextlib.contextmanager
def gpu_job(n: int, log: Callable[[str], None] = print) -> Iterator[list[str]]:
    """A model job's GPUs for the `with` block (see the module docstring): claimed (claim_gpus), usable by its
    torch (require_cuda), and held to the job's share of each where jobs share cards (hold_to_share). n = 0:
    nothing, as claim_gpus."""
    with claim_gpus(n, log) as gpus:
        if n > 0:
            require_cuda(n, log)
            hold_to_share()
        yield gpus
