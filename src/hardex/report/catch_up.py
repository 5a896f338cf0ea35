"""Paper 2's catch-up: does a run on part of the pool match the run on the full pool, in fewer steps?

Paper 2 ("Limits of Difficulty Scaling") trains GRPO on the lower tiers only (e.g. MATH levels 1-3),
with an epoch-based budget that is therefore smaller than the full run's, and reports that this
matches the full-data run's accuracy across tiers "with ~45 % of the training steps". So each
strategy is compared with the `full` run at the end of both runs, per model x task x benchmark,
overall and per tier:

- steps: each run's last checkpoint step; share_pct = 100 x steps / the full run's steps;
- accuracy: each run's final accuracy (%), mean over seeds; base_accuracy: the base model's;
- difference: strategy minus full (points), with a t-interval across seeds: paired by seed number when
  both ran the same seeds, Welch's otherwise, none when a side has a single seed;
- matches: the interval's upper end >= 0 (not shown worse than the full run); null without an interval;
- catch-up: the first checkpoint (the base model counting as step 0) at which a run's accuracy reaches
  the full run's final accuracy of the same seed (of the full run's mean when the seeds differ), as a
  share of the full run's steps: catch_up_pct is the mean over seeds with a t-interval, given only when
  every seed reaches it (reached_seeds says how many did). Paper 2's "~45 % of the steps" is this share.
  A full run that ends no better than the base model is caught up with at 0 %: there was nothing to learn.
"""

from __future__ import annotations

import math

import polars as pl

from hardex.metrics import accuracy_by_tier, sort_tiers
from hardex.report.statistics import seed_difference, t_interval

OVERALL = "overall"  # the tier value of the rows over every test example

CATCH_UP_SCHEMA = {
    "model": pl.Utf8, "task": pl.Utf8, "benchmark": pl.Utf8, "strategy": pl.Utf8, "tier": pl.Utf8,
    "n_examples": pl.Int64, "n_seeds": pl.Int64, "steps": pl.Int64, "full_steps": pl.Int64, "share_pct": pl.Float64,
    "base_accuracy": pl.Float64, "accuracy": pl.Float64, "full_accuracy": pl.Float64, "difference": pl.Float64,
    "difference_ci_low": pl.Float64, "difference_ci_high": pl.Float64, "interval": pl.Utf8, "matches": pl.Boolean,
    "reached_seeds": pl.Int64, "catch_up_pct": pl.Float64, "catch_up_ci_low": pl.Float64, "catch_up_ci_high": pl.Float64,
}


def accuracy_curve(outcomes: pl.DataFrame) -> pl.DataFrame:
    """Per seed and checkpoint step of one run: its accuracy (fraction) over every example (tier
    "overall") and per tier; columns seed, step, tier, accuracy, n_examples.

    `outcomes`: per-example rows (seed, step, tier, n, n_correct) of one strategy on one benchmark.
    """
    overall = outcomes.group_by("seed", "step").agg(
        pl.lit(OVERALL).alias("tier"), (pl.col("n_correct") / pl.col("n")).mean().alias("accuracy"),
        pl.len().alias("n_examples"))
    parts = [overall]
    for (seed,), grp in outcomes.group_by(["seed"]):
        parts.append(accuracy_by_tier(grp).select(pl.lit(seed).alias("seed"), "step", "tier", "accuracy", "n_examples"))
    cols = {"seed": pl.Int64, "step": pl.Int64, "tier": pl.Utf8, "accuracy": pl.Float64, "n_examples": pl.Int64}
    return pl.concat([p.cast(cols) for p in parts]).sort("seed", "step")


def final_accuracy(curve: pl.DataFrame) -> pl.DataFrame:
    """Each seed's last checkpoint of an `accuracy_curve`, its step renamed `steps`."""
    return curve.filter(pl.col("step") == pl.col("step").max().over("seed")).rename({"step": "steps"})


def catch_up_step(curve: pl.DataFrame, target: float) -> int | None:
    """The first step of one seed's curve (one tier) whose accuracy reaches `target`; None if none does.
    A hair of slack: an accuracy equal to the target must reach it despite float rounding."""
    reached = curve.filter(pl.col("accuracy") >= target - 1e-9)
    return int(reached["step"].min()) if reached.height else None


def _with_base(outcomes: pl.DataFrame, base: pl.DataFrame | None) -> pl.DataFrame:
    """A run's outcomes with the base model's as step 0 of each seed: its own seed's base evaluation
    when there is one (the evaluation noise it is paired with), else every base evaluation."""
    if base is None or base.height == 0:
        return outcomes
    cols = ["seed", "step", "tier", "n", "n_correct"]
    parts = [outcomes.select(cols)]
    for seed in outcomes["seed"].unique().to_list():
        own = base.filter(pl.col("seed") == seed) if "seed" in base.columns else base.clear()
        parts.append((own if own.height else base).with_columns(pl.lit(seed).alias("seed"), pl.lit(0).alias("step"))
                     .select(cols))
    return pl.concat([p.cast({"seed": pl.Int64, "step": pl.Int64, "tier": pl.Utf8}) for p in parts])


def catch_up_table(runs: pl.DataFrame, level: float = 0.95, full: str = "full",
                   base: pl.DataFrame | None = None) -> pl.DataFrame:
    """Every strategy against the `full` run, per model x task x benchmark: one row overall, then one
    per tier (in tier order), with the columns of CATCH_UP_SCHEMA (accuracies and shares in %,
    differences in points; see the module's docstring).

    `runs` is report.loading.Results.runs (per-example outcomes with model, task, strategy, seed, step,
    benchmark, tier, n, n_correct); `base` is Results.base, the base model's outcomes, which count as
    step 0 of every curve. Empty when no run used the `full` strategy.
    """
    rows: list[dict] = []
    curves = tier_curves(runs, base, full)
    cells = curves.group_by(["model", "task", "benchmark"], maintain_order=True) if curves.height else []
    for (model, task, bench), cell in cells:
        full_final = final_accuracy(cell.filter(pl.col("strategy") == full))
        if full_final.height == 0:
            continue
        full_steps = int(cell["full_steps"][0])
        tiers = sort_tiers(full_final.filter(pl.col("tier") != OVERALL).select("tier").unique())["tier"].to_list()
        for strategy in dict.fromkeys(cell["strategy"].to_list()):
            if strategy == full:
                continue
            curve = cell.filter(pl.col("strategy") == strategy)
            mine = final_accuracy(curve)
            steps = int(mine["steps"].max())
            for tier in [OVERALL, *tiers]:
                a, b = (part.filter(pl.col("tier") == tier) for part in (mine, full_final))
                if a.height == 0:
                    continue
                full_by_seed = dict(zip(b["seed"], b["accuracy"]))
                diff, lo, hi, how = seed_difference(dict(zip(a["seed"], 100 * a["accuracy"])),
                                                    {s: 100 * v for s, v in full_by_seed.items()}, level)
                # catch-up per seed: against the same seed's full run when both ran it, else the full runs' mean
                same_seeds = sorted(full_by_seed) == sorted(a["seed"].to_list())
                shares = []
                for seed in a["seed"].to_list():
                    target = full_by_seed[seed] if same_seeds else float(b["accuracy"].mean())
                    at = catch_up_step(curve.filter((pl.col("seed") == seed) & (pl.col("tier") == tier)), target)
                    if at is not None:
                        shares.append(100 * at / full_steps)
                every = len(shares) == a.height
                at_base = curve.filter((pl.col("step") == 0) & (pl.col("tier") == tier))["accuracy"]
                share_lo, share_hi = t_interval(shares, level) if every else (math.nan, math.nan)
                rows.append({
                    "model": model, "task": task, "benchmark": bench, "strategy": strategy, "tier": tier,
                    "n_examples": int(b["n_examples"].max()), "n_seeds": a.height, "steps": steps,
                    "full_steps": full_steps, "share_pct": 100 * steps / full_steps if full_steps else None,
                    "base_accuracy": 100 * float(at_base.mean()) if at_base.len() else None,
                    "accuracy": 100 * float(a["accuracy"].mean()), "full_accuracy": 100 * float(b["accuracy"].mean()),
                    "difference": diff, "difference_ci_low": lo, "difference_ci_high": hi, "interval": how,
                    # a hair of slack: identical accuracies must match despite float rounding
                    "matches": None if math.isnan(hi) else hi >= -1e-9,
                    "reached_seeds": len(shares),
                    "catch_up_pct": sum(shares) / len(shares) if every else None,
                    # a share below 0 means nothing: the interval stops at the base model
                    "catch_up_ci_low": (share_lo if math.isnan(share_lo) else max(0.0, share_lo)) if every else None,
                    "catch_up_ci_high": share_hi if every else None,
                })
    return pl.DataFrame(rows, schema=CATCH_UP_SCHEMA)


def tier_curves(runs: pl.DataFrame, base: pl.DataFrame | None = None, full: str = "full") -> pl.DataFrame:
    """Accuracy (fraction) of every run at every checkpoint, overall and per tier, the base model as
    step 0: model, task, benchmark, strategy, seed, step, tier, accuracy, n_examples, and full_steps
    (the cell's full run's last step; null without a full run), for paper 2's per-tier figure."""
    parts = []
    for (model, task, bench), grp in runs.group_by(["model", "task", "benchmark"], maintain_order=True):
        own_base = None if base is None else base.filter(
            (pl.col("model") == model) & (pl.col("task") == task) & (pl.col("benchmark") == bench))
        full_runs = grp.filter(pl.col("strategy") == full)
        full_steps = int(full_runs["step"].max()) if full_runs.height else None
        for strategy in dict.fromkeys(grp["strategy"].to_list()):
            curve = accuracy_curve(_with_base(grp.filter(pl.col("strategy") == strategy), own_base))
            parts.append(curve.select(pl.lit(model).alias("model"), pl.lit(task).alias("task"),
                                      pl.lit(bench).alias("benchmark"), pl.lit(strategy).alias("strategy"), pl.all(),
                                      pl.lit(full_steps, dtype=pl.Int64).alias("full_steps")))
    return pl.concat(parts) if parts else pl.DataFrame()
