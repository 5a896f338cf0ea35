"""Paper 2's catch-up: does a run on part of the pool match the run on the full pool, in fewer steps?

Paper 2 ("Limits of Difficulty Scaling") trains GRPO on the lower tiers only (e.g. MATH levels 1-3),
with an epoch-based budget that is therefore smaller than the full run's, and reports that this
matches the full-data run's accuracy across tiers "with ~45 % of the training steps". So each
strategy is compared with the `full` run at the end of both runs, per model x task x benchmark,
overall and per tier:

- steps: each run's last checkpoint step; share_pct = 100 x steps / the full run's steps;
- accuracy: each run's final accuracy (%), mean over seeds;
- difference: strategy minus full (points), with a t-interval across seeds: paired by seed number when
  both ran the same seeds, Welch's otherwise, none when a side has a single seed;
- matches: the interval's upper end >= 0 (not shown worse than the full run); null without an interval.
"""

from __future__ import annotations

import math

import polars as pl

from hardex.metrics import accuracy_by_tier, sort_tiers
from hardex.report.statistics import seed_difference

OVERALL = "overall"  # the tier value of the rows over every test example

CATCH_UP_SCHEMA = {
    "model": pl.Utf8, "task": pl.Utf8, "benchmark": pl.Utf8, "strategy": pl.Utf8, "tier": pl.Utf8,
    "n_examples": pl.Int64, "n_seeds": pl.Int64, "steps": pl.Int64, "full_steps": pl.Int64, "share_pct": pl.Float64,
    "accuracy": pl.Float64, "full_accuracy": pl.Float64, "difference": pl.Float64,
    "difference_ci_low": pl.Float64, "difference_ci_high": pl.Float64, "interval": pl.Utf8, "matches": pl.Boolean,
}


def final_accuracy(outcomes: pl.DataFrame) -> pl.DataFrame:
    """Per seed of one run: its last checkpoint step (`steps`) and its accuracy there (fraction), over
    every example (tier "overall") and per tier; columns seed, steps, tier, accuracy, n_examples.

    `outcomes`: per-example rows (seed, step, tier, n, n_correct) of one strategy on one benchmark.
    """
    last = outcomes.filter(pl.col("step") == pl.col("step").max().over("seed"))
    overall = last.group_by("seed").agg(
        pl.col("step").first().alias("steps"), pl.lit(OVERALL).alias("tier"),
        (pl.col("n_correct") / pl.col("n")).mean().alias("accuracy"), pl.len().alias("n_examples"))
    parts = [overall]
    for (seed,), grp in last.group_by(["seed"]):
        tiers = accuracy_by_tier(grp)
        parts.append(tiers.select(pl.lit(seed).alias("seed"), pl.col("step").alias("steps"), "tier", "accuracy",
                                  "n_examples"))
    cols = {"seed": pl.Int64, "steps": pl.Int64, "tier": pl.Utf8, "accuracy": pl.Float64, "n_examples": pl.Int64}
    return pl.concat([p.cast(cols) for p in parts])


def catch_up_table(runs: pl.DataFrame, level: float = 0.95, full: str = "full") -> pl.DataFrame:
    """Every strategy against the `full` run at the end of both, per model x task x benchmark: one row
    overall, then one per tier (in tier order), with the columns of CATCH_UP_SCHEMA (accuracies in %,
    differences in points; see the module's docstring).

    `runs` is report.loading.Results.runs (per-example outcomes with model, task, strategy, seed, step,
    benchmark, tier, n, n_correct). Empty when no run used the `full` strategy.
    """
    rows: list[dict] = []
    for (model, task, bench), grp in runs.group_by(["model", "task", "benchmark"], maintain_order=True):
        full_final = final_accuracy(grp.filter(pl.col("strategy") == full))
        if full_final.height == 0:
            continue
        full_steps = int(full_final["steps"].max())
        tiers = sort_tiers(full_final.filter(pl.col("tier") != OVERALL).select("tier").unique())["tier"].to_list()
        for strategy in dict.fromkeys(grp["strategy"].to_list()):
            if strategy == full:
                continue
            mine = final_accuracy(grp.filter(pl.col("strategy") == strategy))
            steps = int(mine["steps"].max())
            for tier in [OVERALL, *tiers]:
                a, b = (part.filter(pl.col("tier") == tier) for part in (mine, full_final))
                if a.height == 0:
                    continue
                diff, lo, hi, how = seed_difference(dict(zip(a["seed"], 100 * a["accuracy"])),
                                                    dict(zip(b["seed"], 100 * b["accuracy"])), level)
                rows.append({
                    "model": model, "task": task, "benchmark": bench, "strategy": strategy, "tier": tier,
                    "n_examples": int(b["n_examples"].max()), "n_seeds": a.height, "steps": steps,
                    "full_steps": full_steps, "share_pct": 100 * steps / full_steps if full_steps else None,
                    "accuracy": 100 * float(a["accuracy"].mean()), "full_accuracy": 100 * float(b["accuracy"].mean()),
                    "difference": diff, "difference_ci_low": lo, "difference_ci_high": hi, "interval": how,
                    # a hair of slack: identical accuracies must match despite float rounding
                    "matches": None if math.isnan(hi) else hi >= -1e-9,
                })
    return pl.DataFrame(rows, schema=CATCH_UP_SCHEMA)
