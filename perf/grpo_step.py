"""GRPO steps per second of the built tiny model's train job (experiments/cpu_tiny.yaml), with TRL's own rollouts
(`model.generate`), with hardex's generator through TRL's rollout function and, with --vllm, with a vLLM engine given
the policy's weights before every step (`grpo.rollouts`: trl, hardex, vllm), side by side in one run, and where a step's
time goes: sampling the rollouts against everything else (scoring, the forward and backward passes, the optimizer, TRL's
bookkeeping).

    python perf/grpo_step.py                       # builds the tiny model once
    python perf/grpo_step.py --model results/models/tiny --steps 20 --repeats 3
    python perf/grpo_step.py --vllm                # where vllm is installed (README: vLLM)
    python perf/grpo_step.py --config experiments/real_model_cpu.yaml --model results/models/smol \
        --steps 4 --repeats 2 --threads 2           # a real 135M model, that config's train job

`trl` is TRL's own step: its `generate`, and its log-probabilities with one pass over each prompt per
completion; hardex's modes score each distinct prompt once (hardex.shared_prefix) where that applies.

Both modes train the same rows with the same settings (the config's grpo section, on its first pool);
they alternate inside each repeat so that a change in the machine's load hits both. One torch thread,
as a train job of the default runs (compute.run_threads).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import tempfile
import time
from pathlib import Path

from _common import OUT, ROOT, GpuBusy, built_model, config_pool, dump, machine, median


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="a model folder (default: build cpu_tiny's once)")
    ap.add_argument("--config", default=str(ROOT / "experiments" / "cpu_tiny.yaml"),
                    help="its grpo section and first pool (the default: the built tiny model's config)")
    ap.add_argument("--steps", type=int, default=20, help="GRPO steps per measured run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--target", type=float, default=None, help="seconds per step to print the figures against")
    ap.add_argument("--vllm", action="store_true", help="also time vLLM rollouts (grpo.rollouts: vllm)")
    ap.add_argument("--precisions", default="auto",
                    help="grpo.precision values to time side by side, comma-separated (e.g. fp32,auto)")
    ap.add_argument("--rollouts", default=None,
                    help="rollout modes, comma-separated (default trl,hardex[,vllm]; "
                         "hardex-dynamic: hardex's decoding by transformers' forward (generation.decode: dynamic); "
                         "hardex-unshared: with TRL's log-probabilities; "
                         "hardex-sdpa: decoding with PyTorch's SDPA at one token; "
                         "hardex-uncut: every completion run to the batch's longest)")
    args = ap.parse_args()
    rollouts = args.rollouts.split(",") if args.rollouts else ["trl", "hardex", *(["vllm"] if args.vllm else [])]
    precisions = args.precisions.split(",")
    modes = [f"{r}/{p}" if len(precisions) > 1 else r for p in precisions for r in rollouts]

    import polars as pl
    import torch
    import trl

    from hardex import shared_prefix, training
    from hardex.controls import task_reward
    from hardex.generation.decode_attention import sdpa_kept
    from hardex.precision import training_precision
    from hardex.settings import grpo_settings
    from hardex.shared_prefix import shared_prompt_logps
    from hardex.training import train_grpo

    torch.set_num_threads(args.threads)
    model = built_model(args.model)
    cfg, task, rows, prompts = config_pool(args.config, model)
    data = [{"prompt": p, "answer": r["answer"]} for p, r in zip(prompts, rows)]
    g0 = cfg["grpo"]

    import accelerate

    rollout_seconds = []
    # where a step's time goes: each phase's seconds summed over a run (TRL's methods, timed where they are)
    phases = {"sampling": (trl.GRPOTrainer, "_generate"),  # the rollouts, whichever backend fills them
              # forward passes: hardex's trainer's (one pass per distinct prompt), or TRL's where it falls back
              "log-probabilities": (training._trainer_class(), "_get_per_token_logps_and_entropies"),
              "backward": (accelerate.Accelerator, "backward")}
    phase_seconds = {name: 0.0 for name in phases}

    # on a GPU a phase's kernels run after its Python returns: wait for them, or the next phase is billed
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)

    def timed(name, method):
        def wrapper(*a, **kw):
            sync()
            t0 = time.perf_counter()
            try:
                return method(*a, **kw)
            finally:
                sync()
                dt = time.perf_counter() - t0
                phase_seconds[name] += dt
                if name == "sampling":
                    rollout_seconds.append(dt)
        return wrapper

    for name, (owner, attr) in phases.items():
        setattr(owner, attr, timed(name, getattr(owner, attr)))
    grouped = shared_prefix.length_groups
    runs = []
    for repeat in range(args.repeats):
        for mode in modes:
            run_cfg = copy.deepcopy(cfg)
            rollout, _, precision = mode.partition("/")
            # hardex-dynamic: hardex's rollouts decoding by transformers' forward at every step (generation.decode:
            # dynamic), without the fixed-shape step (a GPU's CUDA graph, a CPU's lean step and merged adapters)
            run_cfg["generation"]["decode"] = "dynamic" if rollout == "hardex-dynamic" else "auto"
            rollout = rollout.removesuffix("-dynamic")
            # hardex-sdpa: PyTorch's SDPA kernel at one query token instead of hardex.generation.decode_attention
            attention = sdpa_kept() if rollout.endswith("-sdpa") else contextlib.nullcontext()
            rollout = rollout.removesuffix("-sdpa")
            # trl, and hardex-unshared: TRL's log-probabilities (one pass over each prompt per completion)
            unshared = rollout == "trl" or rollout.endswith("-unshared")
            training.shared_prompt_logps = (lambda *a, **k: None) if unshared else shared_prompt_logps
            rollout = rollout.removesuffix("-unshared")
            # hardex-uncut: the completions in one call, each run to the batch's longest (TRL's width)
            shared_prefix.length_groups = ((lambda lengths: [list(range(len(lengths)))]) if rollout.endswith("-uncut")
                                           else grouped)
            rollout = rollout.removesuffix("-uncut")
            run_cfg["grpo"].update(rollouts=rollout, max_steps=args.steps, save_steps=args.steps,
                                   precision=precision or precisions[0])
            g = grpo_settings(run_cfg, next(iter(cfg["models"])))
            rollout_seconds.clear()
            for name in phase_seconds:
                phase_seconds[name] = 0.0
            with tempfile.TemporaryDirectory() as tmp:
                d = Path(tmp)
                with GpuBusy() as busy, attention:
                    train_grpo(model, data, task_reward(task), g, repeat, d, d / "final",
                               d / "steps.parquet", log=lambda *a: None)
                steps = pl.read_parquet(d / "steps.parquet")
            step_s = steps["step_time"].to_list()
            run = {"mode": mode, "repeat": repeat, "steps": len(step_s), "seconds_per_step": median(step_s),
                   "rollout_seconds_per_step": median(rollout_seconds),
                   "first_step_seconds": step_s[0],  # with vLLM, the engine's start
                   "completion_length": float(steps["completion_length"].mean()),
                   "precision": training_precision(g, use_cpu=not torch.cuda.is_available()),
                   "phase_seconds_per_step": {k: v / len(step_s) for k, v in phase_seconds.items()},
                   "gpu_busy_pct": busy.mean}
            runs.append(run)
            print(f"repeat {repeat + 1}/{args.repeats} {mode:6s} ({run['precision']}): "
                  f"{run['seconds_per_step']:.3f} s/step (rollouts {run['rollout_seconds_per_step']:.3f} s; "
                  f"first step {run['first_step_seconds']:.1f} s), "
                  f"mean completion {run['completion_length']:.1f} tokens"
                  + (f", GPU busy {busy.mean:.0f} % of the run" if busy.mean is not None else ""),
                  flush=True)

    summary = {}
    for mode in modes:
        mine = [r for r in runs if r["mode"] == mode]
        step = median([r["seconds_per_step"] for r in mine])
        roll = median([r["rollout_seconds_per_step"] for r in mine])
        busy = [r["gpu_busy_pct"] for r in mine if r["gpu_busy_pct"] is not None]
        summary[mode] = {"steps_per_second": 1 / step, "seconds_per_step": step, "rollout_seconds": roll,
                         "rest_seconds": step - roll, "gpu_busy_pct": median(busy) if busy else None}
    info = machine()
    print(f"\nmachine: {info}")
    print(f"{Path(args.config).name} train job: {g0['prompts_per_step']} prompts x {g0['num_generations']} "
          f"completions per step, up to {g0['max_completion_length']} tokens, {args.threads} thread(s); "
          f"medians of {args.repeats} repeats")
    print(f"{'rollouts':14s} {'steps/s':>8s} {'s/step':>8s} {'sampling s':>11s} {'rest s':>8s}")
    for mode, s in summary.items():
        print(f"{mode:14s} {s['steps_per_second']:8.2f} {s['seconds_per_step']:8.3f} {s['rollout_seconds']:11.3f} "
              f"{s['rest_seconds']:8.3f}")
    print("\nwhere a step goes (seconds per step, medians; the rest: scoring, optimizer, TRL's bookkeeping)")
    print(f"{'rollouts':14s} " + " ".join(f"{name:>17s}" for name in phases) + f" {'rest':>8s}")
    for mode in modes:
        mine = [r for r in runs if r["mode"] == mode]
        each = {name: median([r["phase_seconds_per_step"][name] for r in mine]) for name in phases}
        summary[mode]["phases"] = each
        print(f"{mode:14s} " + " ".join(f"{each[name]:17.3f}" for name in phases)
              + f" {summary[mode]['seconds_per_step'] - sum(each.values()):8.3f}")
    for mode, s in summary.items():
        if s["gpu_busy_pct"] is not None:
            print(f"{mode}: GPU busy {s['gpu_busy_pct']:.0f} % of the run "
                  "(NVML utilization.gpu, median of the repeats)")
    for mode in modes[1:]:
        speedup = summary[modes[0]]["seconds_per_step"] / summary[mode]["seconds_per_step"]
        print(f"{mode}: {speedup:.2f}x the steps per second of {modes[0]}")
    if args.target:
        best = min(summary, key=lambda m: summary[m]["seconds_per_step"])
        met = "met" if summary[best]["seconds_per_step"] <= args.target else "NOT met"
        print(f"target    <= {args.target:g} s per step: {met} ({best}: {summary[best]['seconds_per_step']:.2f} s)")
    dump({"machine": info, "runs": runs, "summary": summary, "args": vars(args)},
         OUT / f"grpo_step_{Path(args.config).stem}{'_vllm' if args.vllm else ''}.json")


if __name__ == "__main__":
    main()
