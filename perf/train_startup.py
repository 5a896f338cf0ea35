"""Where a train job's time goes besides its steps: importing the training stack, and train_grpo's own setup and
teardown (loading the model, building TRL's trainer, writing the checkpoint and the final weights) against the
sum of its steps' times, in one process as a train job runs them (issue 44: on a GPU a 135M model's 16 steps
took 20 s of a 52 s job).

    python perf/train_startup.py --config experiments/real_model_cpu.yaml --model results/models/smol
    python perf/train_startup.py --config docs/results-real-model-study/arith-h100-config.yaml --model M --steps 16
"""

from __future__ import annotations

import argparse
import time

t_start = time.perf_counter()

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="its grpo section and first pool")
    ap.add_argument("--model", required=True, help="a model folder")
    ap.add_argument("--steps", type=int, default=None, help="max_steps (default: the config's)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (a train job's compute.run_threads)")
    args = ap.parse_args()

    marks = {}
    t = time.perf_counter()
    import torch  # noqa: F401

    marks["import torch"] = time.perf_counter() - t
    t = time.perf_counter()
    import polars as pl
    import trl  # noqa: F401

    from hardex.controls import task_reward
    from hardex.settings import grpo_settings
    from hardex.training import train_grpo

    from _common import config_pool

    marks["import transformers, TRL, PEFT, datasets, hardex"] = time.perf_counter() - t
    torch.set_num_threads(args.threads)
    cfg, task, rows, prompts = config_pool(args.config, args.model)
    if args.steps:
        cfg["grpo"].update(max_steps=args.steps, save_steps=args.steps)
    g = grpo_settings(cfg, next(iter(cfg["models"])))
    data = [{"prompt": p, "answer": r["answer"]} for p, r in zip(prompts, rows)]
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        t = time.perf_counter()
        train_grpo(args.model, data, task_reward(task), g, 0, d, d / "final", d / "steps.parquet", log=lambda *a: None)
        wall = time.perf_counter() - t
        steps = pl.read_parquet(d / "steps.parquet")["step_time"].to_list()
    marks[f"train_grpo: its {len(steps)} steps"] = sum(steps)
    marks["train_grpo: the rest (model load, trainer, checkpoint, final weights)"] = wall - sum(steps)
    total = time.perf_counter() - t_start
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    print(f"\n{Path(args.config).name}, {args.model}, {device}")
    for name, s in marks.items():
        print(f"{s:8.1f} s  {name}")
    print(f"{total:8.1f} s  in all, from the interpreter's start of this script (the first step: {steps[0]:.1f} s)")


if __name__ == "__main__":
    main()
