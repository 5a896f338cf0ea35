"""Training in several processes: `accelerate launch` with TRL's own accelerate configs, as TRL users run it.

`grpo.processes` processes (one per GPU on a GPU node; gloo processes on a CPU) run hardex.train_worker
with the strategy `grpo.distributed` names, one of the configs TRL ships in `trl/accelerate_configs/`:
multi_gpu (data parallel), zero1, zero2, zero3 (DeepSpeed ZeRO) or fsdp1, fsdp2. The global batch and the
number of optimizer steps are the one-process run's: each process takes prompts_per_step x num_generations
/ (gradient_accumulation_steps x processes) completions per micro-batch (hardex.training.grpo_args).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from hardex.reward_hook import HookError

#: grpo.distributed: the accelerate config of TRL's that each names, in order of how much of the training
#: state each process keeps (hardex.memory_estimate reads the order)
DISTRIBUTED_STRATEGIES = ("multi_gpu", "zero1", "zero2", "zero3", "fsdp1", "fsdp2")
#: a resolved grpo.precision as accelerate's --mixed_precision names it
MIXED_PRECISION = {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}


class LaunchError(RuntimeError):
    """The processes of a run failed; str() says where their output is."""


def accelerate_config(strategy: str) -> Path:
    """TRL's accelerate config for a strategy (trl/accelerate_configs/<strategy>.yaml)."""
    import trl

    if strategy not in DISTRIBUTED_STRATEGIES:
        raise ValueError(f"grpo.distributed {strategy!r}: expected one of {', '.join(DISTRIBUTED_STRATEGIES)}")
    path = Path(trl.__file__).parent / "accelerate_configs" / f"{strategy}.yaml"
    if not path.is_file():
        raise LaunchError(f"{path}: TRL ships no accelerate config {strategy!r} in this version")
    return path


def free_port() -> int:
    """A port for the processes' rendezvous that nothing on this machine listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent() -> None:
    """On Linux, have the kernel kill this process when its parent dies. torch's launcher starts each
    training process in a session of its own, out of reach of a kill of the job's process group: without
    this, a killed job would leave its processes training on, on GPUs it no longer claims."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the parent died before the line above
        os._exit(1)


def launch_command(spec_file: Path, processes: int, strategy: str, use_cpu: bool,
                   accumulation: int = 1, precision: str = "fp32") -> list[str]:
    """accelerate launch of hardex.train_worker in `processes` processes; on a CPU they meet over gloo
    (accelerate picks it when the Trainer asks for the CPU). `accumulation`: the trainer's
    gradient_accumulation_steps, handed to DeepSpeed, whose config in TRL's zero*.yaml says 1 (transformers
    refuses the mismatch). `precision`: grpo.precision as train_grpo resolved it for this machine (bf16, fp16 or
    fp32: hardex.precision), passed on as accelerate's mixed precision: TRL's configs say bf16, and the
    ACCELERATE_MIXED_PRECISION accelerate exports decides the processes' precision wherever the trainer's own
    asks for none (fp32)."""
    if strategy.startswith(("zero", "fsdp")) and use_cpu:
        raise LaunchError(f"grpo.distributed: {strategy} needs GPUs; on a CPU use multi_gpu (gloo processes)")
    deepspeed = ["--gradient_accumulation_steps", str(accumulation)] if strategy.startswith("zero") else []
    if precision not in MIXED_PRECISION:
        raise LaunchError(f"precision {precision!r}: the launcher takes it resolved for this machine (bf16, fp16 or "
                          f"fp32: hardex.precision.resolve_precision)")
    mixed = MIXED_PRECISION[precision]
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(accelerate_config(strategy)),
            "--num_processes", str(processes), "--num_machines", "1", "--main_process_port", str(free_port()),
            "--mixed_precision", mixed, *deepspeed, "-m", "hardex.train_worker", str(spec_file)]


def hook_error_file(spec_file: Path) -> Path:
    """Where a worker writes a reward hook's error (hardex.train_worker), for the job to raise it as its own."""
    return spec_file.with_name(spec_file.name + ".hook-error")


def launch_training(spec: dict, spec_file: Path, processes: int, strategy: str, log=print) -> None:
    """Write what the workers train (hardex.train_worker reads it) and run them to their end; their output
    goes where this process's does (the job's log). A reward hook's error in a worker is raised here as the
    HookError it was, so that the job does not retry it (hardex.job.NOT_CURED_BY_RETRY)."""
    import torch

    spec_file.write_text(json.dumps(spec))
    hook_error_file(spec_file).unlink(missing_ok=True)
    cmd = launch_command(spec_file, processes, strategy, use_cpu=not torch.cuda.is_available(),
                         accumulation=spec["grpo"]["gradient_accumulation_steps"], precision=spec["grpo"]["precision"])
    log(f"training in {processes} processes ({strategy}): {' '.join(cmd)}")
    sys.stdout.flush()
    sys.stderr.flush()
    threads = max(1, torch.get_num_threads() // processes)  # the job's threads (hardex.job.set_threads), shared
    # the workers import the hardex this process runs: the folder it is imported from (a checkout's src/ or
    # site-packages) first on their path
    imported_from = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "OMP_NUM_THREADS": str(threads),
           "PYTHONPATH": os.pathsep.join([imported_from, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    # the launcher dies with the job, and each training process with the launcher (train_worker)
    done = subprocess.run(cmd, stdout=sys.stdout, stderr=sys.stderr, env=env, preexec_fn=die_with_parent)
    if done.returncode != 0 and hook_error_file(spec_file).is_file():
        raise HookError(hook_error_file(spec_file).read_text().strip())
    if done.returncode != 0:
        raise LaunchError(f"the {processes} training processes failed (exit {done.returncode}); their output is above")
