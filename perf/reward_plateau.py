"""Where does a GRPO run's training reward level off? Measured on the run's own step record, for
choosing how long a study's runs train (experiments/cpu_longer.yaml) instead of guessing.

    # 1. a pilot: one seed of the full pool, longer than the study can afford
    python perf/reward_plateau.py --write-pilot experiments/cpu_longer.yaml --steps 300
    snakemake --cores all --configfile perf/out/cpu_longer_pilot.yaml -- results/train/large/swaps/full/seed0/final
    # 2. its reward curve
    python perf/reward_plateau.py results/train/large/swaps/full/seed0/steps.parquet

Prints the mean training reward per window of steps with a 95 % t-interval over the window's steps;
for each start step s the slope of a straight line fitted to the reward from s to the end, in reward
per 100 steps, with its 95 % interval; and where the reward levels off: the break s* of the best
"rise, then flat" fit (reward = a + b min(step, s*), least squares over every s* on a 5-step grid),
with the slope after s* and the rise before it, each with its interval. A slope after s* whose
interval holds 0 means the rest of the run is not shown to rise.
"""

from __future__ import annotations

import argparse
import copy
import math
from pathlib import Path

from _common import OUT, ROOT


def write_pilot(config: Path, steps: int, model_threads: int = 2) -> Path:
    """The study's config cut to one seed of the full pool, `steps` long, one job using every core."""
    import yaml

    cfg = yaml.safe_load(config.read_text())
    pilot = copy.deepcopy(cfg)
    pilot["seeds"] = [cfg["seeds"][0]]
    pilot["selection"]["strategies"] = ["full"]
    pilot["grpo"].update(max_steps=steps, save_steps=steps)
    pilot["compute"]["run_threads"] = model_threads
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"{config.stem}_pilot.yaml"
    out.write_text(yaml.safe_dump(pilot, sort_keys=False))
    return out


def slope_interval(steps, rewards, level: float = 0.95) -> tuple[float, float, float]:
    """OLS slope of reward on step, in reward per 100 steps, with its t-interval."""
    import numpy as np

    from hardex.statistics import t_ppf

    x, y = np.asarray(steps, dtype=float), np.asarray(rewards, dtype=float)
    xc = x - x.mean()
    slope = float((xc * (y - y.mean())).sum() / (xc**2).sum())
    resid = y - y.mean() - slope * xc
    se = math.sqrt(float((resid**2).sum()) / (len(x) - 2) / float((xc**2).sum()))
    half = t_ppf(0.5 + level / 2, len(x) - 2) * se
    return 100 * slope, 100 * (slope - half), 100 * (slope + half)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("steps_file", nargs="*", help="a run's steps.parquet (several: their mean per step)")
    ap.add_argument("--window", type=int, default=25, help="steps per window of the printed curve")
    ap.add_argument("--write-pilot", type=Path, default=None, help="write the pilot config of this study config")
    ap.add_argument("--steps", type=int, default=300, help="the pilot's length")
    args = ap.parse_args()
    if args.write_pilot:
        print(f"wrote {write_pilot(ROOT / args.write_pilot, args.steps).relative_to(ROOT)}")
        return

    import numpy as np
    import polars as pl

    from hardex.statistics import t_interval

    steps = (pl.concat([pl.read_parquet(f).select("step", "reward_mean") for f in args.steps_file])
             .group_by("step").agg(pl.col("reward_mean").mean()).sort("step"))
    last = int(steps["step"].max())
    print(f"{len(args.steps_file)} run(s), {steps.height} steps; mean training reward per {args.window} steps:")
    for lo in range(0, last, args.window):
        w = steps.filter((pl.col("step") > lo) & (pl.col("step") <= lo + args.window))["reward_mean"].to_list()
        a, b = t_interval(w)
        print(f"  steps {lo + 1:>4}-{lo + len(w):<4} {sum(w) / len(w):.3f} [{a:.3f}, {b:.3f}]")
    print("slope of the reward from step s to the end (per 100 steps):")
    rising_throughout = True
    for s in range(1, last - 2 * args.window + 2, args.window):
        rest = steps.filter(pl.col("step") >= s)
        slope, a, b = slope_interval(rest["step"], rest["reward_mean"])
        print(f"  from {s:>4}: {slope:+.3f} [{a:+.3f}, {b:+.3f}]")
        rising_throughout &= a > 0
    x, y = steps["step"].to_numpy().astype(float), steps["reward_mean"].to_numpy()
    fits = []
    for brk in range(5, last - args.window + 1, 5):
        bent = np.minimum(x, brk)
        b = np.polyfit(bent, y, 1)
        fits.append((float(((y - np.polyval(b, bent)) ** 2).sum()), brk))
    brk = min(fits)[1]
    before, after = steps.filter(pl.col("step") <= brk), steps.filter(pl.col("step") > brk)
    rise, r_lo, r_hi = slope_interval(before["step"], before["reward_mean"])
    slope, a, b = slope_interval(after["step"], after["reward_mean"])
    print(f"rise then flat, best break s* = step {brk}: before it {rise:+.3f} [{r_lo:+.3f}, {r_hi:+.3f}] per 100 "
          f"steps, mean {before['reward_mean'].mean():.3f}; after it {slope:+.3f} [{a:+.3f}, {b:+.3f}], "
          f"mean {after['reward_mean'].mean():.3f}")
    if rising_throughout:
        print(f"still rising at step {last}: the slope to the end is above 0 from every start")


if __name__ == "__main__":
    main()
