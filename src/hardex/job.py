"""The job side of a rule's `script:`: its logging (elapsed time, peak memory, its own GPUs), its threads, the model
and generator it loads from the params rules hand over, and what identifies its reusable work."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import resource
import sys
import time
import traceback
from pathlib import Path

from hardex import devices
from hardex.generation import load_generator
from hardex.models import model_fingerprint, render_prompt, resolve_model
from hardex.reward_hook import HookError

#: failures a retry meets again: a reward hook's error is the user's code, not the node's or the memory's
NOT_CURED_BY_RETRY = (HookError,)


class NotRetried(RuntimeError):
    """A retried attempt of a job whose earlier attempt failed in a way a retry meets again."""


def retry_marker(log_path: Path) -> Path:
    """Beside a job's log: an attempt's failure that a retry would meet again (NOT_CURED_BY_RETRY), its line first.
    Snakemake retries every failure alike (a profile's `retries`), so a retried attempt reads it and stops at once
    instead of training into the same error."""
    return log_path.with_name(log_path.name + ".not-retried")


@contextlib.contextmanager
def job_log(snakemake):
    """Send the job's stdout/stderr (progress bars included) to its log file, and time the job.

    A failure is re-raised after its traceback is in the log, so Snakemake reports the log path.
    """
    path = Path(snakemake.log[0]) if snakemake.log else None
    if path is None:
        yield print
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    gpus = int(getattr(snakemake.resources, "gpu", 0) or 0)
    # the rule's `attempt` resource, where it declares one: 1, then 2, 3 on Snakemake's retries
    attempt, marker = int(getattr(snakemake.resources, "attempt", 1) or 1), retry_marker(path)
    if attempt == 1:  # a new start of the workflow tries again: the user may have fixed it
        marker.unlink(missing_ok=True)
    earlier = marker.read_text().splitlines()[0] if marker.exists() else None
    with open(path, "w", buffering=1) as fh, _descriptors_to(fh), contextlib.redirect_stdout(fh), \
            contextlib.redirect_stderr(fh):
        logging.basicConfig(stream=fh, level=logging.INFO, force=True)
        t0 = time.time()
        print(f"[hardex] rule {snakemake.rule} wildcards {dict(snakemake.wildcards)}"
              + (f" attempt {attempt}" if attempt > 1 else ""), flush=True)
        try:
            if earlier:
                raise NotRetried(f"attempt {attempt} not run: {earlier}; a retry meets it again (its traceback: "
                                 f"{marker}): fix it and start the workflow again")
            # the job's own GPUs before anything starts CUDA, usable and held to its share (hardex.devices.gpu_job)
            with devices.gpu_job(gpus, log=lambda line: print(line, flush=True)):
                yield lambda *a: print(*a, flush=True)
        except NOT_CURED_BY_RETRY as e:
            traceback.print_exc(file=fh)
            # Snakemake deletes a failed attempt's log before the next: the marker keeps the traceback
            marker.write_text(f"attempt {attempt} failed: {e}\n{traceback.format_exc()}")
            raise
        except BaseException:
            traceback.print_exc(file=fh)
            raise
        finally:
            print(f"[hardex] {time.time() - t0:.1f}s{_peaks()}", flush=True)
            over = _over_declared(snakemake)
            if over:
                print(over, flush=True)


@contextlib.contextmanager
def _descriptors_to(fh):
    """Descriptors 1 and 2 pointed at `fh` for the job, then given back: a child process (vLLM's engine
    processes, spawned; a server or launcher started with the job's streams) writes to the descriptors it
    inherits, which redirect_stdout does not move (issue 64, G7). They share the log's file offset, so the
    job's lines and the children's interleave without overwriting each other."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.flush()  # what was written before goes where it was meant to
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
        yield
    finally:
        for stream in (sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(AttributeError, ValueError, OSError):
                stream.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


def _peaks() -> str:
    """The job's peak memory for its log line, what the memory plan (hardex.memory_plan) is set beside: this
    process's resident host memory (Snakemake's benchmark sums a job's whole process tree) and, when the job
    used CUDA, the GPU memory its tensors took and the allocator reserved."""
    host = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    torch = sys.modules.get("torch")  # never import torch just to ask
    if torch is None or not torch.cuda.is_initialized():
        return f", peak host memory {host:.2f} GiB"
    return (f", peak host memory {host:.2f} GiB, peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB "
            f"({torch.cuda.max_memory_reserved() / 2**30:.2f} GiB reserved)")


def _over_declared(snakemake) -> str:
    """A warning when this process's peak resident memory passed the job's `mem_mb` (a cluster would have killed
    it); empty otherwise. On a CPU run mem_mb is the memory plan's estimate, made for prompts of at most
    compute.prompt_tokens tokens."""
    declared = getattr(snakemake.resources, "mem_mb", None)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    if not isinstance(declared, (int, float)) or peak_mb <= declared:
        return ""
    return (f"[hardex] warning: peak host memory {peak_mb:.0f} MB, more than the {declared:.0f} MB this job declared "
            f"(mem_mb; a cluster would have stopped it). On a CPU run that is the memory plan's estimate: are the "
            f"prompts longer than compute.prompt_tokens ({_prompt_tokens(snakemake)})? docs/memory-plan.md")


def _prompt_tokens(snakemake) -> str:
    compute = (getattr(snakemake, "config", None) or {}).get("compute") or {}
    return str(compute.get("prompt_tokens", "unset"))


def set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, int(n)))


def job_model(model: dict) -> dict:
    """A rule's `model` params with the path `from_pretrained` loads: a model that cannot be found fails
    here, in the first job that touches it, with one line (hardex.models.ModelError)."""
    return {**model, "path": resolve_model(model["path"])}


def renderer(tokenizer_path: str, chat: bool, system: str | None = None):
    """A function user_text -> model input text for this model (chat template or plain, with the
    special tokens the model expects and the task's system message `system`, its
    `prompt_format.system`: see hardex.models.render_prompt)."""
    tok = _tokenizer(tokenizer_path)
    return lambda text: render_prompt(tok, text, chat, system)


@functools.lru_cache(maxsize=4)
def _tokenizer(path: str):
    """A model's tokenizer, loaded once per job (an evaluation renders each benchmark with its task's prompt)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def work_identity(model: dict, task, generation: dict | None = None) -> dict:
    """What decides a job's reusable work besides its settings and rows (params `model` and
    `generation` of a rule, and its task): the model's files, its dtype, the scorer and the backend. The
    transformers backend's `auto` dtype is resolved (hardex.generation.hf.pick_dtype): it differs by machine,
    and a float32 CPU run's probe chunks must not be reused by a bfloat16 GPU run's."""
    dtype = model["dtype"]
    if dtype == "auto" and generation is not None and generation["backend"] == "transformers":
        # deferred: hardex.generation.hf imports numpy, which the light jobs (dataset_split, report_compute) never load
        from hardex.generation.hf import pick_dtype

        dtype = str(pick_dtype(dtype, devices.pick_device())).removeprefix("torch.")
    # a verifier package's version joins the scorer only where a family has one: other keys stay as they were
    scorer = [task.name, task.scoring] + ([task.scorer_version] if task.scorer_version else [])
    identity = {"model": model_fingerprint(model["path"]), "dtype": dtype, "scorer": scorer}
    if generation is not None:
        identity["backend"] = generation["backend"]
    return identity


def make_generator(generation: dict, model: dict):
    """The configured generation backend for a model (params `generation` and `model` of a rule)."""
    kwargs = dict(dtype=model["dtype"], token_budget=generation["token_budget"],
                  max_batch_prompts=generation["max_batch_prompts"])
    if generation["backend"] == "vllm":
        kwargs.update(generation.get("vllm", {}))
    else:
        kwargs["decode"] = generation.get("decode", "auto")
    return load_generator(generation["backend"], model["path"], **kwargs)
