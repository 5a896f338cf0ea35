"""Each run against the base model of its own seed: one row per run (`run_summary`), each run's accuracy curve,
its final correct share per test question, and two runs' gains compared by seed (`run_comparison`), which the
gain, pairwise, control and power tables read; and the row order every table shares (`in_paper_order`).

Conventions: see `hardex.report`.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import polars as pl

from hardex.metrics import learnable_pct, summarize
from hardex.report import AnalysisError
from hardex.report.catch_up import EQUIVALENCE_MARGIN
from hardex.report.loading import Results
from hardex.selection import strategy_sort_key
from hardex.statistics import bootstrap_means, bootstrap_p, percentile_interval, t_interval, t_test_p

RUN_KEYS = ["model", "task", "strategy", "seed"]
CELL_KEYS = ["model", "task", "strategy"]

#: the runs table's note
RUNS_NOTE = ("One row per run (model, task, strategy, seed), as accuracy_gain and learnable average "
             "them: accuracy in % on the task's first benchmark, the base model's evaluated with the "
             "run's own seed; gain in points (final checkpoint minus base); learnable_pct over its "
             "n_steps training steps. Read it for the spread behind a mean: one seed that barely "
             "trained moves a 4-seed mean by a quarter of its shortfall.")


_LEADING = {"pool": -2, "base": -1}  # rows that are not strategies come first


def in_paper_order(df: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Sort rows by keys, strategies in paper order ("pool" and "base" rows first)."""
    if df.height == 0:
        return df
    cols = []
    for k in keys:
        if k == "strategy":
            order = {s: _LEADING.get(s, strategy_sort_key(s)[0]) for s in df["strategy"].unique()}
            df = df.with_columns(pl.col("strategy").replace_strict(order, default=99).alias("_s_order"))
            cols += ["_s_order", "strategy"]
        else:
            cols.append(k)
    return df.sort(cols, nulls_last=True).drop("_s_order", strict=False)


def mean_accuracy(df: pl.DataFrame) -> float:
    """The mean correct share of outcome rows (NaN without any)."""
    return float((df["n_correct"] / df["n"]).mean()) if df.height else math.nan


def base_outcomes(res: Results, model: str, task: str, bench: str, seed: int | None = None) -> pl.DataFrame:
    """The base model's outcomes on a benchmark: evaluated with run seed `seed`'s evaluation noise when
    there is such an evaluation (a run's gain is then paired with its own base), else every seed's."""
    base = res.base.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("benchmark") == bench))
    own = base.filter(pl.col("seed") == seed) if seed is not None else base.clear()
    return own if own.height else base


def run_summary(res: Results) -> pl.DataFrame:
    """One row per run: in-distribution base and final accuracy (%), gain (points), learnable %."""
    rows = []
    for (model, task, strategy, seed), grp in res.runs.group_by(RUN_KEYS, maintain_order=True):
        bench = res.in_distribution(task)
        run = grp.filter(pl.col("benchmark") == bench)
        base = base_outcomes(res, model, task, bench, seed)
        if run.height == 0 or base.height == 0:
            raise AnalysisError(f"{model}/{task}/{strategy}/seed{seed}: no outcomes on {bench} (run or base)")
        final_step = int(run["step"].max())
        steps = res.steps.filter((pl.col("model") == model) & (pl.col("task") == task)
                                 & (pl.col("strategy") == strategy) & (pl.col("seed") == seed))
        base_acc, final_acc = mean_accuracy(base), mean_accuracy(run.filter(pl.col("step") == final_step))
        rows.append({"model": model, "task": task, "strategy": strategy, "seed": seed, "benchmark": bench,
                     "final_step": final_step, "base_accuracy": 100 * base_acc, "final_accuracy": 100 * final_acc,
                     "gain": 100 * (final_acc - base_acc),
                     "learnable_pct": learnable_pct(steps) if steps.height else math.nan, "n_steps": steps.height})
    return in_paper_order(pl.DataFrame(rows), RUN_KEYS)


def accuracy_curves(res: Results) -> pl.DataFrame:
    """Accuracy (and pass@k) per model x task x strategy x seed x benchmark x step; step 0 = base.

    The base model appears as its own rows with strategy "base" and a null seed, and as step 0 of
    every run's curve.
    """
    rows = []
    for (model, task, bench), grp in res.base.group_by(["model", "task", "benchmark"], maintain_order=True):
        ks = res.pass_k.get(bench, [1])
        for r in summarize(grp.with_columns(pl.lit(0).alias("step")), ks).iter_rows(named=True):
            rows.append({"model": model, "task": task, "strategy": "base", "seed": None, "benchmark": bench, **r})
        for strategy, seed in res.runs.filter((pl.col("model") == model) & (pl.col("task") == task)) \
                .select("strategy", "seed").unique().iter_rows():
            own = base_outcomes(res, model, task, bench, seed).with_columns(pl.lit(0).alias("step"))
            for r in summarize(own, ks).iter_rows(named=True):
                rows.append({"model": model, "task": task, "strategy": strategy, "seed": seed, "benchmark": bench, **r})
    for (model, task, strategy, seed, bench), grp in res.runs.group_by(
            ["model", "task", "strategy", "seed", "benchmark"], maintain_order=True):
        trained = grp.filter(pl.col("step") > 0)
        if trained.height == 0:  # a run without checkpoints has only its base point
            continue
        s = summarize(trained, res.pass_k.get(bench, [1]))
        for r in s.iter_rows(named=True):
            rows.append({"model": model, "task": task, "strategy": strategy, "seed": seed, "benchmark": bench, **r})
    df = pl.DataFrame(rows, infer_schema_length=None)
    return in_paper_order(df, ["model", "task", "strategy", "seed", "benchmark", "step"])


def final_shares(res: Results, model: str, task: str, strategy: str, seed: int) -> pl.DataFrame:
    """id, f: a run's final-checkpoint correct share per in-distribution test question."""
    run = res.runs.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("strategy") == strategy)
                          & (pl.col("seed") == seed) & (pl.col("benchmark") == res.in_distribution(task)))
    run = run.filter(pl.col("step") == run["step"].max())
    return run.select("id", (pl.col("n_correct") / pl.col("n")).alias("f"))


def base_shares(res: Results, model: str, task: str, seed: int) -> pl.DataFrame:
    """id, b: the base model's correct share per in-distribution test question, evaluated with run seed `seed`
    (`base_outcomes`)."""
    return base_outcomes(res, model, task, res.in_distribution(task), seed).group_by("id").agg(
        (pl.col("n_correct") / pl.col("n")).mean().alias("b"))


def paired_differences(res: Results, model: str, task: str, strategy: str, seed: int) -> np.ndarray:
    """Per test example: final-checkpoint correct share minus the base model's (in-distribution)."""
    # sorted by id: a bootstrap resamples positions, so the order must not depend on the join's (it may not)
    j = final_shares(res, model, task, strategy, seed).join(base_shares(res, model, task, seed), on="id",
                                                            how="inner").sort("id")
    return (j["f"] - j["b"]).to_numpy()


def question_differences(res: Results, model: str, task: str, strategy: str, seeds: Sequence[int]) -> np.ndarray:
    """Seeds x test questions (in-distribution): each seed's final-checkpoint correct share minus its own
    base model's (as `paired_differences`), questions aligned by id (NaN where a seed lacks one), for the
    two-stage bootstrap."""
    parts, as_text = [], pl.col("id").cast(pl.Utf8)
    for i, s in enumerate(seeds):
        parts.append(final_shares(res, model, task, strategy, s).with_columns(as_text)
                     .join(base_shares(res, model, task, s).with_columns(as_text), on="id", how="inner")
                     .select("id", (pl.col("f") - pl.col("b")).alias("d"), pl.lit(str(i)).alias("_seed")))
    wide = pl.concat(parts).pivot(on="_seed", index="id", values="d", aggregate_function="first").sort("id")
    return wide.select([pl.col(str(i)) if str(i) in wide.columns else pl.lit(None, dtype=pl.Float64).alias(str(i))
                        for i in range(len(seeds))]).to_numpy().T.astype(float)


def gains_by_run(summary: pl.DataFrame) -> dict:
    """(model, task, strategy, seed) -> gain, for run_comparison and run_difference."""
    return {(m, t, s, sd): g for m, t, s, sd, g in summary.select(*RUN_KEYS, "gain").iter_rows()}


def run_comparison(res: Results, gain_of: dict, model: str, task: str, a: str, b: str, level: float = 0.95,
                   n_boot: int = 2000, seed: int = 0, margin: float = EQUIVALENCE_MARGIN) -> dict[str, Any] | None:
    """Run strategy a's gain minus b's, paired by seed, with its interval and p-values: over the seeds both
    ran (at least 2), the mean, its t-interval and the paired t-test's p (`statistics.t_test_p`); with one
    shared seed, the paired bootstrap over test questions of the two runs' final correct shares (both beside
    the same base, which cancels): its percentile interval and p's (`statistics.bootstrap_p`), which hold
    the trained checkpoints fixed and so say nothing about training noise. p: of a zero difference (two-sided);
    p_equivalence: two one-sided tests that it lies within +- `margin` points. None without a shared seed.
    `gain_of`: (model, task, strategy, seed) -> gain, from run_summary."""
    seeds = sorted(sd for (m, t, s, sd) in gain_of if (m, t, s) == (model, task, a) and (model, task, b, sd) in gain_of)
    if not seeds:
        return None
    d = np.array([gain_of[model, task, a, sd] - gain_of[model, task, b, sd] for sd in seeds])
    if len(seeds) > 1:
        (lo, hi), (p, p_equivalence) = t_interval(d, level), t_test_p(d, margin)
        how = f"t over {len(seeds)} seeds"
    else:
        pair = final_shares(res, model, task, a, seeds[0]).join(
            final_shares(res, model, task, b, seeds[0]), on="id", suffix="_b").sort("id")  # as paired_differences
        means = 100 * bootstrap_means((pair["f"] - pair["f_b"]).to_numpy(), n_boot, seed)  # in points
        (lo, hi), (p, p_equivalence) = percentile_interval(means, level), bootstrap_p(means, margin)
        how = f"bootstrap over {pair.height} examples"
    return {"n_seeds": len(seeds), "interval": how, "difference": float(d.mean()), "ci_low": lo, "ci_high": hi,
            "p": p, "p_equivalence": p_equivalence}


def run_difference(res: Results, gain_of: dict, model: str, task: str, a: str, b: str, level: float = 0.95,
                   n_boot: int = 2000, seed: int = 0) -> tuple[float | None, float | None, float | None]:
    """Run strategy a's gain minus b's, paired by seed, with its interval (`run_comparison`);
    (None, None, None) without a shared seed."""
    c = run_comparison(res, gain_of, model, task, a, b, level, n_boot, seed)
    return (None, None, None) if c is None else (c["difference"], c["ci_low"], c["ci_high"])
