"""Does the bfloat16 path judge as float32 does? A config's pool probed in both dtypes, same prompts, same
per-sample random streams, same scorer: the mean pass rates, their paired difference with its standard
error, how many examples change from never solved / always solved / mixed, and each dtype's speed.

    python perf/bfloat16_agreement.py --config experiments/real_model_cpu.yaml --model results/models/smol \
        --n-prompts 64 --k 8

The prompts are rendered as the config's probe job renders them; sampling follows its probe section.
"""

from __future__ import annotations

import argparse
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
    args = ap.parse_args()

    import torch

    from hardex.generation import Sampling
    from hardex.generation.hf import HFGenerator

    torch.set_num_threads(args.threads)
    cfg, task, rows, prompts = config_pool(args.config, args.model, args.n_prompts)
    sampling = Sampling.from_config(cfg["probe"])
    keys = [r["id"] for r in rows]
    rates, speed = {}, {}
    for dtype in ("float32", "bfloat16"):
        gen = HFGenerator(args.model, dtype=dtype, progress=False)
        t0 = time.perf_counter()
        samples = gen.generate(prompts, args.k, sampling, seed=0, keys=keys)
        speed[dtype] = gen.tokens_generated / (time.perf_counter() - t0)
        rates[dtype] = np.array([np.mean([task.is_correct(c, r["answer"], p) for c in cs])
                                 for cs, r, p in zip(samples, rows, prompts)])
        print(f"{dtype:9s}: mean pass rate {rates[dtype].mean():.3f}, {speed[dtype]:.0f} tokens/s", flush=True)
    f32, bf16 = rates["float32"], rates["bfloat16"]
    diff = bf16 - f32
    se = float(diff.std(ddof=1) / np.sqrt(len(diff)))

    def kind(r):
        return np.where(r == 0, "never", np.where(r == 1, "always", "mixed"))

    moved = int((kind(f32) != kind(bf16)).sum())
    print(f"\n{len(rows)} prompts x K={args.k} ({Path(args.config).name}, {sampling}), {machine()}")
    print(f"pass rate: float32 {f32.mean():.3f}, bfloat16 {bf16.mean():.3f}; paired difference {diff.mean():+.3f} "
          f"(SE {se:.3f}, {abs(diff.mean()) / se if se else 0:.1f} SE)")
    print(f"examples changing class (never / mixed / always solved): {moved} of {len(rows)}")
    print(f"speed: bfloat16 {speed['bfloat16'] / speed['float32']:.2f}x float32's tokens/s")
    dump({"args": vars(args), "float32": f32.tolist(), "bfloat16": bf16.tolist(), "difference": float(diff.mean()),
          "se": se, "class_changes": moved, "tokens_per_s": speed, "machine": machine()},
         OUT / f"bfloat16_agreement_{Path(args.config).stem}.json")


if __name__ == "__main__":
    main()
