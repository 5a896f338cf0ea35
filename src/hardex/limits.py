"""When does a run on lower tiers catch up with the run on the full pool? (paper 2)

Paper 2 ("Limits of Difficulty Scaling") reports that GRPO on lower-difficulty problems only (e.g.
MATH levels 1-3) matches the full-dataset run's accuracy "across difficulty tiers while using only
~45 % of the training steps". Here that number is made precise and computable from evaluation curves:

- target: the full run's accuracy at its final checkpoint (per tier, or overall);
- match step: the first checkpoint step at which the lower-tier run's accuracy reaches
  target - tolerance (with `sustained`, it must also stay there at every later checkpoint);
- share: match step / the full run's final step (paper 2's ~45 %).

Across tiers means every tier at once: the first step at which each tier of the lower-tier run has
reached that tier's target. A curve is a DataFrame with columns `step` and `accuracy`, optionally
`tier` (as `evaluation.accuracy_by_tier` gives) and `seed` (curves of several seeds are averaged per
step before anything is compared). Step 0 (the base model) may be part of a curve.
"""

from __future__ import annotations

import polars as pl


class LimitsError(ValueError):
    pass


def mean_curve(curve: pl.DataFrame, by: tuple[str, ...] = ()) -> pl.DataFrame:
    """Accuracy per step (and `by` columns), averaged over seeds; sorted by step."""
    missing = {"step", "accuracy", *by} - set(curve.columns)
    if missing:
        raise LimitsError(f"curve has no column(s) {', '.join(sorted(missing))}")
    if curve.height == 0:
        raise LimitsError("empty curve")
    keys = [*by, "step"]
    return curve.group_by(keys).agg(pl.col("accuracy").mean()).sort(keys)


def steps_to_match(
    steps: list[int], accuracy: list[float], target: float, tolerance: float = 0.0, sustained: bool = False
) -> int | None:
    """First step whose accuracy is >= target - tolerance (and stays so, if `sustained`); None if never.

    `steps` need not be sorted; accuracies go with them pairwise.
    """
    if len(steps) != len(accuracy):
        raise LimitsError(f"{len(steps)} steps but {len(accuracy)} accuracies")
    points = sorted(zip(steps, accuracy))
    ok = [a >= target - tolerance - 1e-12 for _, a in points]
    for i, (step, _) in enumerate(points):
        if ok[i] and (not sustained or all(ok[i:])):
            return step
    return None


def final_point(curve: pl.DataFrame) -> tuple[int, float]:
    """(last step, its accuracy) of a single curve (already averaged over seeds)."""
    last = curve.sort("step").row(-1, named=True)
    return int(last["step"]), float(last["accuracy"])


def catch_up(
    low: pl.DataFrame, full: pl.DataFrame, tolerance: float = 0.0, sustained: bool = False
) -> dict:
    """Overall accuracy: when the lower-tier run first reaches the full run's final accuracy.

    Returns target, full_steps (the full run's final step), match_step (None if never) and share
    (match_step / full_steps, None if never).
    """
    low_c, full_c = mean_curve(low), mean_curve(full)
    full_steps, target = final_point(full_c)
    if full_steps <= 0:
        raise LimitsError("the full run's curve has no training checkpoint (only step 0)")
    match = steps_to_match(low_c["step"].to_list(), low_c["accuracy"].to_list(), target, tolerance, sustained)
    return {
        "target": target,
        "full_steps": full_steps,
        "match_step": match,
        "share": None if match is None else match / full_steps,
    }


def catch_up_by_tier(
    low: pl.DataFrame, full: pl.DataFrame, tolerance: float = 0.0, sustained: bool = False
) -> pl.DataFrame:
    """Per tier and across tiers: when the lower-tier run first matches the full run's final accuracy.

    One row per tier of the full run (columns tier, target, full_steps, match_step, share), then a
    row with tier "all": the first step at which every tier has matched at once (the paper's
    "across difficulty tiers"). Steps where the lower-tier run lacks a tier do not count for "all".
    """
    low_c, full_c = mean_curve(low, ("tier",)), mean_curve(full, ("tier",))
    full_steps = int(full_c["step"].max())
    if full_steps <= 0:
        raise LimitsError("the full run's curve has no training checkpoint (only step 0)")
    rows, hits = [], {}
    for (tier,), grp in full_c.group_by(["tier"], maintain_order=True):
        _, target = final_point(grp)
        mine = low_c.filter(pl.col("tier") == tier)
        steps, acc = mine["step"].to_list(), mine["accuracy"].to_list()
        match = steps_to_match(steps, acc, target, tolerance, sustained) if steps else None
        hits[tier] = {s for s, a in zip(steps, acc) if a >= target - tolerance - 1e-12}
        rows.append({"tier": str(tier), "target": target, "full_steps": full_steps, "match_step": match})
    all_steps = sorted(set(low_c["step"].to_list()))
    together = [s for s in all_steps if all(s in h for h in hits.values())]
    if sustained:
        together = [s for s in together if all(t in together for t in all_steps if t >= s)]
    match_all = together[0] if together else None
    rows.append({"tier": "all", "target": None, "full_steps": full_steps, "match_step": match_all})
    out = pl.DataFrame(
        rows, schema={"tier": pl.Utf8, "target": pl.Float64, "full_steps": pl.Int64, "match_step": pl.Int64}
    )
    return out.with_columns((pl.col("match_step") / pl.col("full_steps")).alias("share"))


CATCH_UP_SCHEMA = {"model": pl.Utf8, "task": pl.Utf8, "benchmark": pl.Utf8, "strategy": pl.Utf8, "tier": pl.Utf8,
                   "target_accuracy": pl.Float64, "full_steps": pl.Int64, "match_step": pl.Int64,
                   "share_pct": pl.Float64}


def _curves(outcomes: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(overall, per-tier) accuracy curves of per-example outcomes (step, tier, n, n_correct), every
    seed's examples pooled per step (the same examples in each seed: the mean of the seeds' means)."""
    from hardex.evaluation import accuracy_by_tier

    overall = outcomes.group_by("step").agg((pl.col("n_correct") / pl.col("n")).mean().alias("accuracy"))
    return overall, accuracy_by_tier(outcomes)


def catch_up_table(runs: pl.DataFrame, base: pl.DataFrame, full: str = "full", tolerance: float = 0.0,
                   sustained: bool = False) -> pl.DataFrame:
    """Paper 2's catch-up of every strategy against the `full` run, per model x task x benchmark:
    one row overall, one per tier and one across tiers ("all"), with the full run's final accuracy
    (target, %), its steps, the first matching checkpoint (step 0 is the base model) and its share (%).

    `runs` and `base` are analysis.Results' frames (per-example outcomes with model, task, strategy,
    seed, step, benchmark, tier, n, n_correct). Empty when no run used the `full` strategy.
    """
    rows: list[dict] = []
    for (model, task, bench), grp in runs.group_by(["model", "task", "benchmark"], maintain_order=True):
        full_runs = grp.filter(pl.col("strategy") == full)
        if full_runs.height == 0:
            continue
        start = base.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("benchmark") == bench))
        start = start.with_columns(pl.lit(0, dtype=pl.Int64).alias("step"))
        cols = ["step", "tier", "n", "n_correct"]
        full_all, full_tiers = _curves(full_runs.select(cols))
        key = {"model": model, "task": task, "benchmark": bench}
        for strategy in [s for s in dict.fromkeys(grp["strategy"].to_list()) if s != full]:
            mine = pl.concat([start.select(cols), grp.filter(pl.col("strategy") == strategy).select(cols)],
                             how="vertical_relaxed")
            low_all, low_tiers = _curves(mine)
            o = catch_up(low_all, full_all, tolerance, sustained)
            rows.append({**key, "strategy": strategy, "tier": "overall", "target_accuracy": 100 * o["target"],
                         "full_steps": o["full_steps"], "match_step": o["match_step"]})
            if full_tiers.height:
                for r in catch_up_by_tier(low_tiers, full_tiers, tolerance, sustained).iter_rows(named=True):
                    rows.append({**key, "strategy": strategy, "tier": r["tier"],
                                 "target_accuracy": None if r["target"] is None else 100 * r["target"],
                                 "full_steps": r["full_steps"], "match_step": r["match_step"]})
    out = pl.DataFrame(rows, schema={k: v for k, v in CATCH_UP_SCHEMA.items() if k != "share_pct"})
    return out.with_columns((100 * pl.col("match_step") / pl.col("full_steps")).alias("share_pct"))
