"""The GPU smoke run (tools/gpu-smoke.sh): the GPU mechanisms a first paid run depends on, each in a process of
its own, one line per check (PASS, FAIL or SKIP with its reason) and a summary. docs/gpu-runs.md says what each
line means and what ran where.

    python tools/gpu_smoke.py [--cpu] [--architecture Qwen/Qwen3-4B] [--dir DIR]   # all checks
    python tools/gpu_smoke.py --check NAME ...                                     # one, in this process

A tool beside the library, not part of it (like scripts/): it reaches into most of hardex.

`--cpu` runs what a CPU can (gloo in place of nccl, the CUDA-order spy, the versions) and skips the rest with
its reason; tests/unit/test_gpu_first_run.py runs it so. A check's process prints `RESULT <json>` last:
status, detail, and the peak GPU memory beside the memory plan's estimate where it trained.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# the library, also where hardex is not pip-installed (an offline GPU host: docs/offline-gpu.md)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

CHECKS = ("versions", "nccl-reduction", "cuda-order", "grpo-1proc", "grpo-accelerate", "grpo-4bit", "vllm")
OPTIONAL = ("bitsandbytes", "deepspeed", "vllm", "tensorboard", "trl", "snakemake", "polars", "datasets",
            "math_verify")
#: the smoke run's GRPO: two steps of LoRA with gradient checkpointing and TensorBoard, a few short completions
SMOKE_GRPO = {"finetune": "lora", "gradient_checkpointing": True, "report_to": "tensorboard", "max_steps": 2,
              "save_steps": 1, "prompts_per_step": 4, "num_generations": 4, "max_completion_length": 16,
              "gradient_accumulation_steps": 1, "beta": 0.0, "rollouts": "hardex", "precision": "auto"}


class Skip(Exception):
    """A check that cannot run here; str() is the reason."""


def _result(status: str, detail: str, **extra) -> None:
    print("RESULT " + json.dumps({"status": status, "detail": detail, **extra}), flush=True)


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


# ---- the checks (each runs in a process of its own) ----------------------------------------------------------

def check_versions(cpu: bool, work: Path, architecture: str) -> str:
    import platform

    import torch

    lines = [f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda})"]
    for name in ("transformers", "trl", "peft", "accelerate"):
        try:
            lines.append(f"{name} {__import__(name).__version__}")
        except ImportError:
            lines.append(f"{name} MISSING")
    if not cpu and torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        lines.append(f"GPU {p.name}, {p.total_memory / 2**30:.1f} GiB, {torch.cuda.device_count()} visible")
    found = {m: importlib.util.find_spec(m) is not None for m in OPTIONAL}
    lines.append("optional: " + ", ".join(f"{m} {'yes' if ok else 'no'}" for m, ok in found.items()))
    for line in lines:
        print(f"  {line}")
    return "; ".join(lines)


def check_nccl_reduction(cpu: bool, work: Path, architecture: str) -> str:
    """A 1-process group through hardex's step-logger reduction: nccl with CUDA tensors on a GPU, gloo on a CPU."""
    import torch
    import torch.distributed as dist

    from hardex.checkpoints import summed_over_processes
    from hardex.launch import free_port

    gpu = not cpu and torch.cuda.is_available()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    backend = "nccl" if gpu else "gloo"
    if gpu:
        torch.cuda.set_device(0)
    dist.init_process_group(backend, rank=0, world_size=1)
    try:
        device = torch.device("cuda", 0) if gpu else torch.device("cpu")
        counts = {"rollouts_generated": 16, "rollouts_discarded": 0, "tokens_generated": 123, "filter_capped": False}
        out = summed_over_processes(counts, device)
        if out != counts:
            raise AssertionError(f"reduced {counts} to {out}")
    finally:
        dist.destroy_process_group()
    return f"{backend} group of 1, counts reduced on {device}" + ("" if gpu else " (nccl needs CUDA: not run)")


def check_cuda_order(cpu: bool, work: Path, architecture: str) -> str:
    """Server mode narrows CUDA_VISIBLE_DEVICES to the training GPUs before anything touches CUDA (a stand-in
    server answers /health in place of `trl vllm-serve`)."""
    import torch

    from hardex.launch import free_port
    from hardex.vllm_server import serve_rollouts

    seen = []
    for name in ("is_available", "device_count", "init", "current_device", "set_device"):
        real = getattr(torch.cuda, name)

        def spy(*a, _real=real, _name=name, **k):
            seen.append((_name, os.environ.get("CUDA_VISIBLE_DEVICES")))
            return _real(*a, **k)

        setattr(torch.cuda, name, spy)
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"  # training 0, the server 1 (absent on a 1-GPU machine: never used)
    port = free_port()
    health = ("import http.server, sys\nclass H(http.server.BaseHTTPRequestHandler):\n"
              "    def do_GET(self): self.send_response(200); self.end_headers()\n"
              "    def log_message(self, *a): pass\n"
              "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n")
    with serve_rollouts("m", {"processes": 1, "vllm_server_gpus": 1}, log=lambda _: None,
                        command=[sys.executable, "-c", health, str(port)], port=port):
        gpu = torch.cuda.is_available()  # as the trainer asks, after the narrowing
        visible = torch.cuda.device_count() if not cpu and gpu else None
    early = [s for s in seen if s[1] != "0"]
    if early:
        raise AssertionError(f"CUDA touched before narrowing: {early}")
    if visible not in (None, 1):
        raise AssertionError(f"the trainer sees {visible} GPUs, not its 1")
    return (f"narrowed to 0 before {len(seen)} CUDA call(s)"
            + ("" if visible is None else f"; trainer sees {visible} GPU"))


def _standin(work: Path, architecture: str) -> Path:
    from hardex.rehearsal.standin import build_standin

    out = work / "standin"
    if not (out / "config.json").exists():
        build_standin(out, architecture, log=lambda _: None)
    return out


def _grpo(**changes) -> dict:
    from hardex.schema import schema_defaults

    return {**schema_defaults("grpo"), **SMOKE_GRPO, "lora": schema_defaults("grpo", "lora"), **changes}


def _rows() -> list[dict]:
    return [{"prompt": f"What is {i} + {i}? Answer:", "answer": str(2 * i)} for i in range(8)]


def _plan_gib(model: Path, grpo: dict) -> float:
    """The memory plan's estimate for this train job on a GPU (its card undeclared: nothing refused)."""
    from hardex.memory_estimate import estimate_train

    arch = json.loads((model / "config.json").read_text())
    return estimate_train(arch, dtype="bfloat16", finetune=grpo["finetune"], lora=grpo["lora"], grpo=grpo,
                          prompt_tokens=16, device="cuda").total


def _train(work: Path, architecture: str, name: str, grpo: dict, launch: bool = False) -> str:
    import torch

    from hardex.training import train_grpo

    model = _standin(work, architecture)
    run = work / name
    reward = lambda completion, answer, prompt: float(answer in completion)  # noqa: E731
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    if launch:  # the path of grpo.processes > 1: accelerate launch of hardex.train_worker, here with 1 process
        from hardex.io import checkpoint_steps
        from hardex.launch import launch_training
        from hardex.precision import resolve_precision
        from hardex.schedule import run_steps
        from hardex.tracking import tracker_args

        ckpt = run / "checkpoints"
        ckpt.mkdir(parents=True, exist_ok=True)
        # the precision resolved as train_grpo resolves it
        grpo = {**grpo, "precision": resolve_precision(grpo["precision"], use_cpu=not torch.cuda.is_available())}
        spec = {"model_path": str(model), "rows": _rows(), "reward": {"family": "arith", "scoring": "lenient",
                                                                       "scale": 1.0},
                "grpo": grpo, "seed": 0, "ckpt_dir": str(ckpt), "resume": None, "steps_total": run_steps(grpo, 8),
                "trainer_args": tracker_args(grpo["report_to"], name, run)}
        import threading

        used, stop = [], threading.Event()

        def sample():  # the device's used memory while the launched process trains (its own peak is not ours)
            while not stop.is_set():
                free, total = torch.cuda.mem_get_info()
                used.append((total - free) / 2**30)
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True) if torch.cuda.is_available() else None
        if sampler:
            sampler.start()
        try:
            launch_training(spec, ckpt / "launch.json", 1, "multi_gpu", log=lambda *a: None)
        finally:
            stop.set()
        steps = checkpoint_steps(ckpt)
        if not steps or steps[-1] != 2:
            raise AssertionError(f"checkpoints {steps}, expected 2 steps")
        peak = max(used) if used else None  # the device's used memory, the CUDA contexts included
    else:
        summary = train_grpo(str(model), _rows(), reward, grpo, 0, run, run / "final", run / "steps.parquet",
                             log=lambda *a: None, run_name=name)
        if summary["steps"] != 2:
            raise AssertionError(f"trained {summary['steps']} steps, expected 2")
        peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
    events = list((run / "tracking").rglob("events.out.tfevents*")) if (run / "tracking").exists() else \
        list(run.rglob("events.out.tfevents*"))
    if not events:
        raise AssertionError("no TensorBoard event file written")
    plan = _plan_gib(model, grpo)
    what = "device memory used at most" if launch else "peak GPU memory allocated"
    measured = "no CUDA: no GPU peak" if peak is None else f"{what} {peak:.2f} GiB"
    return f"2 steps, LoRA, checkpointing, TensorBoard; {measured}, plan {plan:.2f} GiB"


def check_grpo_1proc(cpu: bool, work: Path, architecture: str) -> str:
    if cpu:
        raise Skip("CPU mode: two GRPO steps on a CPU are tests/unit/test_training.py's")
    if not _gpu():
        raise Skip("no CUDA GPU")
    return _train(work, architecture, "grpo-1proc", _grpo())


def check_grpo_accelerate(cpu: bool, work: Path, architecture: str) -> str:
    if cpu:
        raise Skip("CPU mode: accelerate's gloo processes are tests/unit/test_training.py's")
    if not _gpu():
        raise Skip("no CUDA GPU")
    return _train(work, architecture, "grpo-accelerate", _grpo())


def check_grpo_4bit(cpu: bool, work: Path, architecture: str) -> str:
    if cpu or not _gpu():
        raise Skip("4-bit weights need a CUDA GPU")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise Skip("bitsandbytes is not installed (pip install 'hardex[quantization]')")
    return _train(work, architecture, "grpo-4bit", _grpo(quantization="4bit", max_steps=2))


def check_vllm(cpu: bool, work: Path, architecture: str) -> str:
    if importlib.util.find_spec("vllm") is None:
        raise Skip("vllm is not installed (pip install 'hardex[vllm]')")
    if cpu or not _gpu():
        raise Skip("CPU mode: vLLM on a CPU is the tests/vllm lane's")
    import torch

    from hardex.generation.sampling import Sampling
    from hardex.generation.vllm_backend import VLLMGenerator

    model = _standin(work, architecture)
    gen = VLLMGenerator(str(model), dtype="bfloat16", progress=False, gpu_memory_utilization=0.3,
                        max_model_len=512)
    prompts = [r["prompt"] for r in _rows()]
    try:
        probe = gen.generate_ids(prompts, 4, Sampling(1.0, 1.0, 16), seed=0, desc="probe")  # K = 4 samples each
        evaluate = gen.generate_ids(prompts, 1, Sampling(0.0, 1.0, 16), seed=0, desc="evaluate")  # greedy
    finally:
        gen.close()
    if [len(p) for p in probe] != [4] * len(prompts) or [len(e) for e in evaluate] != [1] * len(prompts):
        raise AssertionError("wrong number of completions")
    free, total = torch.cuda.mem_get_info()
    return f"probe 8 x 4 and evaluate 8 x 1 through vLLM; engine share 0.3 of {total / 2**30:.1f} GiB"


# ---- the runner ----------------------------------------------------------------------------------------------

def run_check(name: str, cpu: bool, work: Path, architecture: str) -> None:
    """One check in this process; prints RESULT last."""
    fn = globals()["check_" + name.replace("-", "_")]
    try:
        _result("PASS", fn(cpu, work, architecture))
    except Skip as e:
        _result("SKIP", str(e))
    except Exception as e:  # any failure is the check's result, with its type
        import traceback

        traceback.print_exc()
        _result("FAIL", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def run_in_processes(script: str, names, work: Path, flags: list[str], limit_of, budget: float | None = None) -> int:
    """Run each named check of `script` in a process of its own (`--check NAME --dir work` + flags): a clean
    peak-memory counter per check, and a crash or out-of-memory ends only that check. Prints one
    PASS/FAIL/SKIP line each (the versions check's lines too) and a SUMMARY; returns the number of failures.
    `limit_of(name)`: the check's seconds; `budget`: seconds for all of them (a check that would start with
    under 20 s left is skipped)."""
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    t0 = time.time()
    for name in names:
        limit = limit_of(name) if budget is None else min(limit_of(name), budget - (time.time() - t0))
        if limit < 20:
            print(f"SKIP {name}: the budget is spent", flush=True)
            counts["SKIP"] += 1
            continue
        t = time.time()
        cmd = [sys.executable, script, "--check", name, "--dir", str(work), *flags]
        log = work / f"{name}.log"
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
            stdout, out = done.stdout, done.stdout + done.stderr
            line = next((x for x in reversed(done.stdout.splitlines()) if x.startswith("RESULT ")), None)
            res = json.loads(line[7:]) if line else {"status": "FAIL", "detail": f"exit {done.returncode}, no result"}
        except subprocess.TimeoutExpired as e:
            stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            out = stdout + str(e.stderr or "")
            res = {"status": "FAIL", "detail": f"timed out after {limit:.0f} s"}
        log.write_text(out)
        counts[res["status"]] += 1
        for x in stdout.splitlines():
            if x.startswith("  "):  # what a check prints for the record (versions, model sizes)
                print(x)
        print(f"{res['status']} {name} ({time.time() - t:.0f} s): {res['detail']}", flush=True)
        if res["status"] == "FAIL":
            print(f"  log: {log}; last lines:\n    " + "\n    ".join(out.strip().splitlines()[-6:]), flush=True)
    print(f"SUMMARY {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP in {time.time() - t0:.0f} s",
          flush=True)
    return counts["FAIL"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu", action="store_true", help="what a CPU can check; the rest skipped with its reason")
    ap.add_argument("--architecture", default="Qwen/Qwen3-4B", help="a kept architecture (hardex.architectures)")
    ap.add_argument("--dir", default=os.environ.get("GPU_SMOKE_DIR") or "/tmp/hardex-gpu-smoke")
    ap.add_argument("--check", choices=CHECKS, help="run one check in this process")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per check")
    args = ap.parse_args(argv)
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    if args.check:
        run_check(args.check, args.cpu, work, args.architecture)
        return 0
    print("CPU mode" if args.cpu else "GPU mode", flush=True)
    flags = ["--architecture", args.architecture] + (["--cpu"] if args.cpu else [])
    return 1 if run_in_processes(__file__, CHECKS, work, flags, lambda _: args.timeout) else 0


if __name__ == "__main__":
    sys.exit(main())
