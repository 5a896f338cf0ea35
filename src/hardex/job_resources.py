"""What each kind of model job asks of the machine: its threads and Snakemake's `gpu`, `mem_mb` (host memory, MB)
and `runtime` (Slurm's -t, minutes) resources, one call per job kind (`model_job`, `probe_job`, `train_job`,
`evaluate_base_job`, `evaluate_run_job`) for the rules to read. A value is a number or a function of the
arguments Snakemake hands a resource (wildcards, input, attempt: each retry asks for more); runtimes are
`job_time`'s, host memory the memory plan's on a CPU run (`memory_plan.host_memory_mb`), else the size formula.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from hardex import job_time, layout
from hardex.memory_plan import host_memory_mb
from hardex.settings import benchmark_settings, grpo_settings, seed_list

Resource = int | Callable[..., int]


@dataclass(frozen=True)
class JobResources:
    """A job kind's `threads:` and its `resources:` gpu, mem_mb and runtime, as a rule reads them."""

    threads: Resource
    gpu: Resource
    mem_mb: Resource
    runtime: Resource


def _pool(cfg: dict, task: str) -> str:
    return layout.data_file(cfg["tasks"][task]["pool"])


def _size_mem_mb(cfg: dict, model: str, processes: int = 1) -> float:
    """compute.mem_mb for each of a job's processes (Python, torch, CUDA, TRL) and one copy of the model
    (mem_mb_per_b x size_b), not one per process: from_pretrained maps the safetensors files, whose pages the
    processes share in the page cache, then moves the weights to each process's GPU (under ZeRO 3 each process
    loads only its shard)."""
    c = cfg["compute"]
    return c["mem_mb"] * processes + c["mem_mb_per_b"] * cfg["models"][model]["size_b"]


def _mem_mb(cfg: dict, kind: str, processes: Callable[[str], int] = lambda model: 1) -> Callable[..., int]:
    """A `kind` job's memory (train, probe, evaluate): the memory plan's on a CPU run, else the size formula of
    the job's `processes`; times the attempt (out-of-memory retries)."""
    planned = functools.cache(functools.partial(host_memory_mb, cfg))  # at the first job sized, once

    def mem_mb(wildcards, attempt):
        model = wildcards.model
        if (model, kind) in planned():
            return planned()[model, kind] * attempt
        return int(_size_mem_mb(cfg, model, processes(model)) * attempt)

    return mem_mb


def _generation_threads(cfg: dict, threads: int) -> int:
    """`threads`, or more for a vLLM engine on GPUs, which runs processes of its own beside the job's (its engine
    core, a worker per GPU): under Slurm threads become --cpus-per-task, and 1-2 CPUs would time-slice them."""
    gen = cfg["generation"]
    on_gpu_vllm = cfg["compute"]["gpu"] > 0 and gen["backend"] == "vllm"
    return max(threads, 2 + gen["vllm"]["tensor_parallel_size"] if on_gpu_vllm else 0)


def model_job(cfg: dict) -> JobResources:
    """A job that makes a model's folder (building or converting it; converting asks for no GPU): its memory by
    the model's size, its runtime by the size formula (its work is not estimated)."""

    def mem_mb(wildcards, attempt):
        return int(_size_mem_mb(cfg, wildcards.model) * attempt)

    def runtime(wildcards, attempt):
        return job_time.runtime_minutes(cfg, wildcards.model, None, attempt)

    c = cfg["compute"]
    return JobResources(threads=c["threads"], gpu=c["gpu"], mem_mb=mem_mb, runtime=runtime)


def probe_job(cfg: dict) -> JobResources:
    """A probe job: on GPUs, compute.gpu for each GPU of its vLLM engine (tensor_parallel_size); its runtime from
    the pool's rows once the file exists (Snakemake sizes a job's resources again when it submits it)."""

    def runtime(wildcards, input, attempt):
        return job_time.probe_minutes(cfg, wildcards.model, wildcards.task, input.pool, attempt)

    return JobResources(threads=_generation_threads(cfg, cfg["compute"]["threads"]),
                        gpu=job_time.generation_gpus(cfg), mem_mb=_mem_mb(cfg, "probe"), runtime=runtime)


def _evaluate_job(cfg: dict, runtime: Callable[..., int]) -> JobResources:
    return JobResources(threads=_generation_threads(cfg, cfg["compute"]["run_threads"]),
                        gpu=job_time.generation_gpus(cfg), mem_mb=_mem_mb(cfg, "evaluate"), runtime=runtime)


def evaluate_base_job(cfg: dict) -> JobResources:
    """The base model's evaluation: as a probe's, its runtime every benchmark once per run seed."""
    seeds = len(seed_list(cfg))

    def runtime(wildcards, input, attempt):
        benchmarks = benchmark_settings(cfg, wildcards.task, base=True)
        return job_time.evaluate_base_minutes(cfg, wildcards.model, benchmarks, input.benchmarks, seeds, attempt)

    return _evaluate_job(cfg, runtime)


def evaluate_run_job(cfg: dict) -> JobResources:
    """A run's evaluation: as a probe's, its runtime every benchmark at each of the run's checkpoints."""

    def runtime(wildcards, input, attempt):
        w = wildcards
        return job_time.evaluate_run_minutes(cfg, w.model, w.task, w.strategy, benchmark_settings(cfg, w.task),
                                             input.benchmarks, _pool(cfg, w.task), attempt)

    return _evaluate_job(cfg, runtime)


def train_job(cfg: dict) -> JobResources:
    """A train job: run_threads for each training process (grpo.processes, hardex.launch) and on GPUs the CPUs of
    the run's vLLM engine (in-process: its engine core) or server (its front end, engine core and a worker per
    GPU); compute.gpu GPUs for each process and each GPU of a vLLM server of the run's own; on GPUs, host memory
    for each process (the size formula); its runtime from its steps' work."""

    def processes(model: str) -> int:
        return grpo_settings(cfg, model)["processes"]

    def threads(wildcards):
        grpo = grpo_settings(cfg, wildcards.model)
        engine = {"vllm": 1, "vllm-server": 2 + grpo["vllm_server_gpus"]}.get(grpo["rollouts"], 0)
        return cfg["compute"]["run_threads"] * grpo["processes"] + (engine if cfg["compute"]["gpu"] > 0 else 0)

    def gpu(wildcards):
        return job_time.train_gpus(cfg, wildcards.model)

    def runtime(wildcards, input, attempt):
        w = wildcards
        return job_time.train_minutes(cfg, w.model, w.task, w.strategy, input.subset, _pool(cfg, w.task), attempt)

    return JobResources(threads=threads, gpu=gpu, mem_mb=_mem_mb(cfg, "train", processes), runtime=runtime)

