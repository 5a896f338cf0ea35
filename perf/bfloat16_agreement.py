"""Does the bfloat16 path judge as float32 does? A config's pool probed in both dtypes, same prompts, same
per-sample random streams, same scorer: the mean pass rates, their paired difference with its standard
error, how many examples change from never solved / always solved / mixed, and each dtype's speed.

    python perf/bfloat16_agreement.py --config experiments/real_model_cpu.yaml --model results/models/smol \
        --n-prompts 64 --k 8

With --compare attention, both arms run in bfloat16 and differ in the attention of a decode step: PyTorch's
SDPA kernel against hardex's (hardex.generation.decode_attention), which a CPU's generation uses.

With --compare decode, both arms run in bfloat16 and differ in the decode step: transformers' forward
(decode="dynamic") against the lean step (hardex.generation.lean_step, a CPU's default). Without an adapter the
two are the same to the bit; with --adapter (a trained run's LoRA checkpoint) the lean step decodes with the
adapter merged into the weights, which is where they can differ:

    python perf/bfloat16_agreement.py --config config.yaml --model results/models/smol --compare decode \
        --adapter results/runs/smol/addition/full/seed0/checkpoints/checkpoint-8 --n-prompts 100 --k 8 --threads 1

The prompts are rendered as the config's probe job renders them; sampling follows its probe section.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

import numpy as np

from _common import OUT, config_pool, dump, machine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--model", required=True, help="the model folder (e.g. what convert_model wrote)")
    ap.add_argument("--n-prompts", type=int, default=64)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compare", choices=["dtype", "attention", "decode"], default="dtype",
                    help="dtype: float32 against bfloat16; attention: SDPA at one query token against hardex's; "
                         "decode: transformers' forward against the lean step")
    ap.add_argument("--adapter", help="a LoRA checkpoint folder both arms decode with (use_checkpoint)")
    args = ap.parse_args()

    import torch

    from hardex.generation import Sampling
    from hardex.generation.decode_attention import sdpa_kept
    from hardex.generation.hf import HFGenerator

    torch.set_num_threads(args.threads)
    cfg, task, rows, prompts = config_pool(args.config, args.model, args.n_prompts)
    sampling = Sampling.from_config(cfg["probe"])
    keys = [r["id"] for r in rows]
    rates, speed = {}, {}
    # (label, dtype, PyTorch's SDPA at one query token, decode mode)
    arms = {"dtype": [("float32", "float32", False, "dynamic"), ("bfloat16", "bfloat16", False, "dynamic")],
            "attention": [("sdpa", "bfloat16", True, "dynamic"), ("hardex", "bfloat16", False, "dynamic")],
            "decode": [("dynamic", "bfloat16", False, "dynamic"), ("lean", "bfloat16", False, "lean")]}[args.compare]
    for label, dtype, sdpa, decode in arms:
        gen = HFGenerator(args.model, dtype=dtype, progress=False, decode=decode)
        if args.adapter:
            gen.use_checkpoint(args.adapter)
        t0 = time.perf_counter()
        with sdpa_kept() if sdpa else contextlib.nullcontext():
            samples = gen.generate(prompts, args.k, sampling, seed=0, keys=keys)
        speed[label] = gen.tokens_generated / (time.perf_counter() - t0)
        rates[label] = np.array([np.mean([task.is_correct(c, r["answer"], p) for c in cs])
                                 for cs, r, p in zip(samples, rows, prompts)])
        print(f"{label:9s}: mean pass rate {rates[label].mean():.3f}, {speed[label]:.0f} tokens/s", flush=True)
    (a, before), (b, after) = ((label, rates[label]) for label, *_ in arms)
    diff = after - before
    se = float(diff.std(ddof=1) / np.sqrt(len(diff)))

    def kind(r):
        return np.where(r == 0, "never", np.where(r == 1, "always", "mixed"))

    moved = int((kind(before) != kind(after)).sum())
    print(f"\n{len(rows)} prompts x K={args.k} ({Path(args.config).name}, {sampling}), {machine()}")
    print(f"pass rate: {a} {before.mean():.3f}, {b} {after.mean():.3f}; paired difference {diff.mean():+.3f} "
          f"(SE {se:.3f}, {abs(diff.mean()) / se if se else 0:.1f} SE)")
    print(f"examples changing class (never / mixed / always solved): {moved} of {len(rows)}")
    print(f"speed: {b} {speed[b] / speed[a]:.2f}x {a}'s tokens/s")
    name = {"dtype": "bfloat16", "attention": "attention", "decode": "decode"}[args.compare] + "_agreement"
    dump({"args": vars(args), a: before.tolist(), b: after.tolist(), "difference": float(diff.mean()),
          "se": se, "class_changes": moved, "tokens_per_s": speed, "machine": machine()},
         OUT / f"{name}_{Path(args.config).stem}.json")


if __name__ == "__main__":
    main()
