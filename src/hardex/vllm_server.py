"""GRPO rollouts from a vLLM server on GPUs of its own (`grpo.rollouts: vllm-server`): TRL's server mode.

The train job asks for grpo.processes + grpo.vllm_server_gpus GPUs. `serve_rollouts` gives the last
vllm_server_gpus of them to `trl vllm-serve` (tensor parallel over them), keeps the first ones for the
training processes, and hands TRL the address: TRL's own generation then samples every step from the
server, and pushes the policy's weights to it before each (NCCL). The server stops with the job.

It needs CUDA GPUs and vLLM in the training environment; without them it is refused before anything starts.
Not run here (no GPU was lent to this work): tests/unit/test_vllm_server.py checks the split, the command
and the refusal, and holds a GPU test that skips without CUDA.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any, Iterator

from hardex.devices import gpu_share, memory_utilization, node_gpus
from hardex.launch import free_port
from hardex.precision import DTYPE_NAMES, resolve_precision


class ServerError(RuntimeError):
    """A vLLM server that cannot run here; str() says why."""


def split_gpus(visible: list[str], processes: int, server_gpus: int) -> tuple[list[str], list[str]]:
    """The job's GPUs as (the training processes', the server's): the first `processes`, the last
    `server_gpus`."""
    if len(visible) < processes + server_gpus:
        raise ServerError(f"grpo.rollouts: vllm-server needs {processes} GPU(s) for training and {server_gpus} for "
                          f"the server; this job sees {len(visible)} ({','.join(visible) or 'none'})")
    return visible[:processes], visible[len(visible) - server_gpus:]


def server_command(model_path: str, grpo: dict[str, Any], port: int) -> list[str]:
    """`trl vllm-serve` for the run's model: tensor parallel over its GPUs, the engine settings of
    generation.vllm, sampling in the dtype the policy computes in (grpo.precision, hardex.precision)."""
    vllm = grpo.get("vllm") or {}
    dtype = DTYPE_NAMES[resolve_precision(grpo.get("precision", "auto"), use_cpu=False)]
    cmd = [sys.executable, "-m", "trl.cli.main", "vllm-serve", "--model", str(model_path), "--host", "127.0.0.1",
           "--port", str(port), "--tensor_parallel_size", str(grpo["vllm_server_gpus"]),
           "--dtype", dtype,
           # the server's GPUs are the job's own, shared with other jobs where HARDEX_JOBS_PER_GPU says so
           "--gpu_memory_utilization",
           str(memory_utilization(vllm.get("gpu_memory_utilization"), gpu_share=gpu_share()))]
    if vllm.get("max_model_len"):
        cmd += ["--max_model_len", str(vllm["max_model_len"])]
    return cmd


#: how long a server may take to answer /health before the job gives up (a model's download and load)
SERVER_START_TIMEOUT = 600.0


def wait_for_server(server: subprocess.Popen, port: int, timeout: float = SERVER_START_TIMEOUT,
                    interval: float = 1.0) -> None:
    """Until the server answers GET /health (TRL's check): a server that exits first fails the job at once,
    with its exit status, instead of TRL waiting out its whole timeout."""
    t0 = time.time()
    while True:
        if server.poll() is not None:
            raise ServerError(f"the vLLM server exited with status {server.returncode} before it answered; its "
                              f"output is above")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=interval) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.time() - t0 > timeout:
            raise ServerError(f"the vLLM server did not answer on port {port} within {timeout:.0f} s")
        time.sleep(interval)


@contextlib.contextmanager
def serve_rollouts(model_path: str, grpo: dict[str, Any], log=print, command: list[str] | None = None,
                   port: int | None = None) -> Iterator[dict[str, Any]]:
    """Start the server on the job's last GPUs, leave the first ones visible to training, yield the
    GRPOConfig arguments that connect TRL to it; stop the server at the end.

    Nothing here touches CUDA: torch reads CUDA_VISIBLE_DEVICES once, when CUDA starts, so the training GPUs
    are narrowed before (a trainer that saw the server's GPU too would wrap a 4-bit model in DataParallel).
    The job's GPUs are the ones hardex.devices claimed (CUDA_VISIBLE_DEVICES) or, unset, the node's.
    `command` and `port`: another server in place of `trl vllm-serve` (the tests' stand-in).
    """
    if command is None and importlib.util.find_spec("vllm") is None:
        raise ServerError("grpo.rollouts: vllm-server needs vllm in the training environment "
                          "(pip install 'hardex[vllm]')")
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
               if d.strip() not in ("", "-1")] or node_gpus()
    if not visible:
        raise ServerError("grpo.rollouts: vllm-server needs CUDA GPUs (a vLLM server of its own); on a CPU use "
                          "hardex or vllm")
    training, serving = split_gpus(visible, grpo["processes"], grpo["vllm_server_gpus"])
    port = port or free_port()
    cmd = command or server_command(model_path, grpo, port)
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(training)  # before anything in this process starts CUDA
    log(f"vLLM server on GPU(s) {','.join(serving)}, training on {','.join(training)}: {' '.join(cmd)}")
    server = subprocess.Popen(cmd, stdout=sys.stdout, stderr=sys.stderr, start_new_session=True,
                              env={**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(serving)})
    try:
        wait_for_server(server, port)
        yield {"use_vllm": True, "vllm_mode": "server", "vllm_server_host": "127.0.0.1", "vllm_server_port": port,
               "vllm_group_port": free_port(), "vllm_server_timeout": 60.0}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
