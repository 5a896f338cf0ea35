"""Paper 2's catch-up: does a run on part of the pool end as accurate as the run on the full pool,
with a fraction of its steps?

Paper 2 ("Limits of Difficulty Scaling") trains GRPO on the lower tiers only (e.g. MATH levels 1-3),
one epoch of that smaller subset, and reports that this "matches full-dataset accuracy across
difficulty tiers while using only ~45 % training steps", to be confirmed by paired tests over seeds.
Read that way the claim has two parts, a step share and an equivalence of final accuracies, and that
is what `catch_up_table` measures for every strategy against the `full` run, per model x task x
benchmark, overall and per tier:

- share_pct (the headline): 100 x the run's own steps (its last checkpoint: one epoch of its data)
  / the full run's steps;
- equivalent: is the run's FINAL accuracy equivalent to the full run's final accuracy within
  +- `margin` points (`report.equivalence_margin`)? Two one-sided tests at alpha = 1 - level, in
  their interval form: the (1 - 2 alpha) t-interval of the difference (run minus full, in points;
  paired by seed number when both sides ran the same seeds, Welch's otherwise) lies inside
  [-margin, +margin]: "yes"; lies wholly outside it (a difference beyond the margin is shown): "no";
  otherwise, or with no interval (a single seed on a side): "not shown";
- full_gain: the full run's final accuracy minus the base model's (points, paired by seed, with its
  `level` t-interval). A full run that does not gain over the base model has taught nothing a shorter
  run could match "in fewer steps": where its mean gain is <= 0, or its interval reaches 0, the row's
  equivalent says "full run does not gain over base" and the row has no share and no first crossing.
  With a single seed only the mean decides (and the verdict is "not shown" anyway); without a base
  evaluation the gain is unknown and not checked;
- first_crossing_share (secondary, not paper 2's measure): the first checkpoint, the base model
  counting as step 0, at which the run's accuracy reaches the full run's final accuracy of the same
  seed (of the full runs' mean when the seeds differ), as a share of the full run's steps; mean over
  seeds with a `level` t-interval, given only when every seed reaches it (reached_seeds say how many).
  It measures how early a run crosses, not whether it ends level, so a run that crosses once and then
  falls back still scores early.
"""

from __future__ import annotations

import math

import polars as pl

from hardex.metrics import accuracy_by_tier, sort_tiers
from hardex.statistics import seed_difference, t_interval

OVERALL = "overall"  # the tier value of the rows over every test example
EQUIVALENCE_MARGIN = 5.0  # points: report.equivalence_margin's default
NOT_SHOWN = "not shown"
NO_GAIN = "full run does not gain over base"
SLACK = 1e-9  # equal accuracies must compare equal despite float rounding

CATCH_UP_SCHEMA = {
    "model": pl.Utf8, "task": pl.Utf8, "benchmark": pl.Utf8, "strategy": pl.Utf8, "tier": pl.Utf8,
    "n_examples": pl.Int64, "n_seeds": pl.Int64, "steps": pl.Int64, "full_steps": pl.Int64, "share_pct": pl.Float64,
    "base_accuracy": pl.Float64, "accuracy": pl.Float64, "full_accuracy": pl.Float64,
    "full_gain": pl.Float64, "full_gain_ci_low": pl.Float64, "full_gain_ci_high": pl.Float64,
    "difference": pl.Float64, "difference_ci_low": pl.Float64, "difference_ci_high": pl.Float64, "interval": pl.Utf8,
    "margin": pl.Float64, "equivalent": pl.Utf8, "reached_seeds": pl.Int64, "first_crossing_share": pl.Float64,
    "first_crossing_ci_low": pl.Float64, "first_crossing_ci_high": pl.Float64,
}


def equivalence_verdict(low: float, high: float, margin: float) -> str:
    """"yes" when the interval [low, high] of a difference lies inside [-margin, margin], "no" when it
    lies wholly outside, "not shown" when it straddles an end of the margin or is missing (NaN)."""
    if math.isnan(low) or math.isnan(high):
        return NOT_SHOWN
    if low >= -margin - SLACK and high <= margin + SLACK:
        return "yes"
    if high < -margin - SLACK or low > margin + SLACK:
        return "no"
    return NOT_SHOWN


def full_run_gains(gain: float, low: float) -> bool:
    """Whether the full run gains over the base model: mean gain > 0 and, when it has an interval,
    the interval's low end > 0."""
    return gain > SLACK and (math.isnan(low) or low > SLACK)


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
                   base: pl.DataFrame | None = None, margin: float = EQUIVALENCE_MARGIN) -> pl.DataFrame:
    """Every strategy against the `full` run, per model x task x benchmark: one row overall, then one
    per tier (in tier order), with the columns of CATCH_UP_SCHEMA (accuracies and shares in %,
    differences and margin in points). The module's docstring defines each: share_pct and equivalent
    are paper 2's claim; first_crossing_share is a secondary view.

    `runs` is report.loading.Results.runs (per-example outcomes with model, task, strategy, seed, step,
    benchmark, tier, n, n_correct); `base` is Results.base, the base model's outcomes, which count as
    step 0 of every curve and give the full run's gain. `level`: the full run's gain interval and the
    first crossing's; the equivalence interval is at 1 - 2 (1 - level) (0.90 for 0.95). Empty when no
    run used the `full` strategy.
    """
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
        raise ValueError(f"report.equivalence_margin: {margin!r} is not a positive finite number of points")
    tost_level = max(0.0, 1 - 2 * (1 - level))  # two one-sided tests at alpha = 1 - level
    rows: list[dict] = []
    curves = tier_curves(runs, base, full)
    has_base = base is not None and base.height > 0
    cells = curves.group_by(["model", "task", "benchmark"], maintain_order=True) if curves.height else []
    for (model, task, bench), cell in cells:
        full_curve = cell.filter(pl.col("strategy") == full)
        full_final = final_accuracy(full_curve)
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
                                                    {s: 100 * v for s, v in full_by_seed.items()}, tost_level)
                if how.endswith("seeds"):
                    how += f", {round(100 * tost_level)} %"
                gain, gain_lo, gain_hi = _full_gain(full_curve.filter(pl.col("tier") == tier), level) if has_base \
                    else (None, math.nan, math.nan)
                gains = gain is None or full_run_gains(gain, gain_lo)
                crossing = _first_crossing(curve.filter(pl.col("tier") == tier), a, b, full_steps, level)
                at_base = curve.filter((pl.col("step") == 0) & (pl.col("tier") == tier))["accuracy"]
                rows.append({
                    "model": model, "task": task, "benchmark": bench, "strategy": strategy, "tier": tier,
                    "n_examples": int(b["n_examples"].max()), "n_seeds": a.height, "steps": steps,
                    "full_steps": full_steps,
                    "share_pct": 100 * steps / full_steps if full_steps and gains else None,
                    "base_accuracy": 100 * float(at_base.mean()) if at_base.len() else None,
                    "accuracy": 100 * float(a["accuracy"].mean()), "full_accuracy": 100 * float(b["accuracy"].mean()),
                    "full_gain": gain, "full_gain_ci_low": gain_lo, "full_gain_ci_high": gain_hi,
                    "difference": diff, "difference_ci_low": lo, "difference_ci_high": hi, "interval": how,
                    "margin": float(margin), "equivalent": equivalence_verdict(lo, hi, margin) if gains else NO_GAIN,
                    "reached_seeds": crossing[0],
                    **dict(zip(("first_crossing_share", "first_crossing_ci_low", "first_crossing_ci_high"),
                               crossing[1:] if gains else (None, None, None))),
                })
    return pl.DataFrame(rows, schema=CATCH_UP_SCHEMA)


def catch_up_note(catch: pl.DataFrame, level: float = 0.95) -> str:
    """The catch_up table's note: how to read each column at `level`, or why the table is empty."""
    if catch.height == 0:
        return "No run on the full pool (strategy full) in this configuration: nothing to catch up with."
    pct, tost_pct, alpha = (f"{round(100 * level)} %", f"{round(100 * max(0.0, 1 - 2 * (1 - level)))} %",
                            f"{1 - level:.3g}")
    no_verdict = (" Rows with a single seed on a side have no interval, so equivalence is not shown: run several "
                  "seeds to tell a match from noise." if catch["difference_ci_low"].is_nan().any() else "")
    return ("Each strategy against the run on the full pool (strategy full), on each benchmark, "
            "overall and per tier: paper 2's claim that the lower tiers alone match the full run's "
            "accuracy with ~45 % of its steps, read as a step share and an equivalence. share_pct = 100 "
            "x steps (the run's own last checkpoint: all its training) / full_steps. accuracy, "
            "full_accuracy: final accuracy in % (mean over seeds). difference: run minus full, in "
            f"points, with its {tost_pct} t-interval (paired by seed number when both ran the same "
            "seeds, Welch's otherwise; none with one seed). equivalent: two one-sided tests at "
            f"alpha = {alpha}: yes when that interval lies inside [-margin, +margin] "
            "(report.equivalence_margin, points), no when it lies wholly outside (a difference "
            "beyond the margin), not shown otherwise or without an interval. full_gain: the full "
            f"run's final minus the base model's accuracy (base_accuracy), paired by seed, with its "
            f"{pct} t-interval; where its mean is <= 0 or its interval reaches 0 the row says "
            f"'{NO_GAIN}' and gives no share and no first crossing. first_crossing_share "
            "(secondary, not paper 2's measure): the share of the full run's steps at which the run "
            "first reaches the full run's final accuracy of the same seed, the base model counting as "
            f"step 0 (mean over seeds, {pct} t-interval, low end stopped at 0; given only when every "
            "seed reaches it, reached_seeds of n_seeds did)." + no_verdict)


def _full_gain(full_curve: pl.DataFrame, level: float) -> tuple[float | None, float, float]:
    """The full run's final accuracy minus the base model's (step 0 of the same seed's curve), in points:
    (mean over seeds, t-interval low, high; NaN bounds with one seed; None, NaN, NaN without a step 0).
    One tier's curve."""
    start = full_curve.filter(pl.col("step") == 0).select("seed", pl.col("accuracy").alias("_base"))
    ends = final_accuracy(full_curve).join(start, on="seed")
    per_seed = (100 * (ends["accuracy"] - ends["_base"])).to_list()
    lo, hi = t_interval(per_seed, level)
    return (sum(per_seed) / len(per_seed), lo, hi) if per_seed else (None, math.nan, math.nan)


def _first_crossing(curve: pl.DataFrame, mine: pl.DataFrame, full_final: pl.DataFrame, full_steps: int,
                    level: float) -> tuple[int, float | None, float | None, float | None]:
    """(seeds that reach it, mean share %, interval low, high) of one tier's first crossing of the full
    run's final accuracy; the mean and interval None unless every seed reaches it."""
    full_by_seed = dict(zip(full_final["seed"], full_final["accuracy"]))
    # against the same seed's full run when both ran it, else the full runs' mean
    same_seeds = sorted(full_by_seed) == sorted(mine["seed"].to_list())
    shares = []
    for seed in mine["seed"].to_list():
        target = full_by_seed[seed] if same_seeds else float(full_final["accuracy"].mean())
        at = catch_up_step(curve.filter(pl.col("seed") == seed), target)
        if at is not None:
            shares.append(100 * at / full_steps)
    if len(shares) < mine.height:
        return len(shares), None, None, None
    lo, hi = t_interval(shares, level)
    # a share below 0 means nothing: the interval stops at the base model
    return len(shares), sum(shares) / len(shares), (lo if math.isnan(lo) else max(0.0, lo)), hi


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
