"""Does GRPO move the built tiny model (experiments/cpu_tiny.yaml, the default until 2026-11-26) within its budget? A
sweep of GRPO settings on its full pools, each run scored as the report scores it: the gain in points on the held-out
test split over the base model, with a paired bootstrap 95 % interval over test examples.

    python perf/grpo_sweep.py --model results/models/tiny           # the model the workflow built
    python perf/grpo_sweep.py --steps 30 60 --lr 3e-5 1e-4 2e-4 --loss grpo:group dapo:none
    python perf/grpo_sweep.py --config experiments/cpu_study.yaml --model results/models/large --tasks swaps

Each setting trains on the whole pool of a task (the `full` strategy, the largest subset) or on a random
subset of it (`--subset`) from the base model, then samples the test split `--eval-samples` times per
example at temperature 1, with the same sampling seed for the base model and the run (common random
numbers, as the workflow does), and scores the examples it trained on the same way, before and after:
a gain there and none on the test split is memorization.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import tempfile
import time
from pathlib import Path

from _common import OUT, ROOT, built_model, dump, machine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="a built model folder (default: build cpu_tiny's once)")
    ap.add_argument("--config", default="experiments/cpu_tiny.yaml",
                    help="the config whose datasets and grpo section to use (the built tiny model's)")
    ap.add_argument("--tasks", nargs="+", default=["arith", "swaps"])
    ap.add_argument("--steps", nargs="+", type=int, default=[30])
    ap.add_argument("--lr", nargs="+", type=float, default=[3e-5, 1e-4, 2e-4])
    ap.add_argument("--loss", nargs="+", default=["grpo:group", "dapo:none"], help="loss_type:scale_rewards")
    ap.add_argument("--prompts-per-step", type=int, default=None)
    ap.add_argument("--subset", nargs="+", type=int, default=[0],
                    help="train on a random subset of this size (0 = the pool)")
    ap.add_argument("--eval-samples", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import numpy as np
    import polars as pl
    import torch
    import yaml

    from hardex.config import check_config
    from hardex.controls import task_reward
    from hardex.evaluation import evaluate_examples
    from hardex.generation.hf import HFGenerator
    from hardex.models import render_prompt
    from hardex.statistics import bootstrap_mean_interval
    from hardex.tasks import get_task
    from hardex.training import train_grpo

    torch.set_num_threads(args.threads)
    model = built_model(args.model)
    cfg = check_config(yaml.safe_load((ROOT / args.config).read_text()))
    render = lambda text: render_prompt(None, text, False)  # noqa: E731 - the default's plain prompts
    decoding = {"n_samples": args.eval_samples, "temperature": 1.0, "top_p": 1.0,
                "max_new_tokens": cfg["evaluation"]["decoding"]["max_new_tokens"]}
    generator = HFGenerator(model, progress=False)
    runs = []
    for task_name in args.tasks:
        task = get_task(task_name)
        spec = {**cfg["datasets"][task_name]["splits"]["pool"], "name": "pool"}
        pool = task.load_split(spec)
        test = task.load_split({**cfg["datasets"][task_name]["splits"]["test"], "name": "test"}).to_dicts()
        generator.use_checkpoint(None)
        base = evaluate_examples(generator, task, test, render, decoding, 0, seed=1)
        base_acc = (base["n_correct"] / base["n"]).to_numpy()
        for steps, lr, loss, size in itertools.product(args.steps, args.lr, args.loss, args.subset):
            train = pool.sample(size, seed=0) if size else pool
            rows = [{"prompt": render(task.prompt(r)), "answer": r["answer"]} for r in train.to_dicts()]
            loss_type, scale = loss.split(":")
            g = copy.deepcopy(cfg["grpo"])
            g.update(max_steps=steps, save_steps=steps, learning_rate=lr, loss_type=loss_type, scale_rewards=scale)
            if args.prompts_per_step:
                g["prompts_per_step"] = args.prompts_per_step
            t0 = time.time()
            with tempfile.TemporaryDirectory() as tmp:
                d = Path(tmp)
                train_grpo(model, rows, task_reward(task), g, 0, d, d / "final",
                           d / "steps.parquet", log=lambda *a: None)
                train_s = time.time() - t0
                reward = pl.read_parquet(d / "steps.parquet")["reward_mean"].to_numpy()
                generator.use_checkpoint(d / "final")
                final = evaluate_examples(generator, task, test, render, decoding, steps, seed=1)
                trained_on = train.to_dicts()  # the examples it trained on, before and after
                seen_after = evaluate_examples(generator, task, trained_on, render, decoding, steps, seed=2)
                generator.use_checkpoint(None)
                seen_before = evaluate_examples(generator, task, trained_on, render, decoding, 0, seed=2)
            diff = (final["n_correct"] / final["n"]).to_numpy() - base_acc
            seen_gain = 100 * float((seen_after["n_correct"] / seen_after["n"]).mean()
                                    - (seen_before["n_correct"] / seen_before["n"]).mean())
            lo, hi = bootstrap_mean_interval(diff, 0.95, 2000, 0)
            k = max(1, len(reward) // 5)
            run = {"task": task_name, "steps": steps, "prompts_per_step": g["prompts_per_step"], "lr": lr,
                   "loss": loss, "trained_on": len(rows), "base": 100 * base_acc.mean(), "gain": 100 * diff.mean(),
                   "gain_ci": [100 * lo, 100 * hi], "gain_on_trained": seen_gain,
                   "reward_first": float(reward[:k].mean()), "reward_last": float(reward[-k:].mean()),
                   "train_seconds": round(train_s, 1)}
            runs.append(run)
            print(f"{task_name:6s} {len(rows):4d} examples  steps {steps:4d} x {g['prompts_per_step']} prompts  "
                  f"lr {lr:.0e}  {loss:10s}  test gain {run['gain']:+5.1f} [{run['gain_ci'][0]:+5.1f}, "
                  f"{run['gain_ci'][1]:+5.1f}]  on its training examples {seen_gain:+5.1f}  "
                  f"reward {run['reward_first']:.2f} -> {run['reward_last']:.2f}  ({train_s:.0f} s)", flush=True)
    info = machine()
    print(f"\nmachine: {info}; base accuracy " + ", ".join(
        f"{t} {np.mean([r['base'] for r in runs if r['task'] == t]):.1f}" for t in args.tasks))
    dump({"machine": info, "args": vars(args), "runs": runs}, OUT / "grpo_sweep.json")


if __name__ == "__main__":
    main()
