"""Final accuracy broken down: on every out-of-distribution benchmark (Table 4, `ood_table`), per difficulty
tier (`tier_table`), and across the base model's splits (base_wrong, base_right, their size-matched random
control and the full pool: `base_split_table`).

Conventions: see `hardex.report`.
"""

from __future__ import annotations

import math

import polars as pl

from hardex.metrics import accuracy_by_tier, sort_tiers
from hardex.report.loading import Results
from hardex.report.runs import CELL_KEYS, RUN_KEYS, accuracy_curves, in_paper_order
from hardex.selection import BASE_SPLIT_STRATEGIES, strategy_sort_key


def ood_table(res: Results, curves: pl.DataFrame | None = None) -> pl.DataFrame:
    """Table 4: pass@k of the base model and each strategy's final checkpoint on every OOD benchmark.

    Values are in percent, averaged over seeds; a task with one benchmark has no OOD rows.
    """
    curves = accuracy_curves(res) if curves is None else curves
    rows = []
    for task, benches in res.benchmarks.items():
        for bench in benches[1:]:
            ks = res.pass_k.get(bench, [1])
            sub = curves.filter((pl.col("task") == task) & (pl.col("benchmark") == bench))
            if sub.height == 0:
                continue
            base = sub.filter(pl.col("strategy") == "base")
            runs = sub.filter(pl.col("strategy") != "base")
            finals = runs.join(runs.group_by(RUN_KEYS).agg(pl.col("step").max().alias("_last")), on=RUN_KEYS) \
                .filter(pl.col("step") == pl.col("_last"))
            for part, strategy_col in ((base, None), (finals, "strategy")):
                keys = ["model"] + ([strategy_col] if strategy_col else [])
                for key, grp in part.group_by(keys, maintain_order=True):
                    row = {"model": key[0], "task": task, "benchmark": bench,
                           "strategy": key[1] if strategy_col else "base",
                           "n_seeds": grp["seed"].n_unique() if strategy_col else 0,
                           "step": int(grp["step"].max()), "n_examples": int(grp["n_examples"].max())}
                    for k in ks:
                        col = f"pass@{k}"
                        vals = grp[col].drop_nulls() if col in grp.columns else pl.Series([], dtype=pl.Float64)
                        row[col] = 100 * float(vals.mean()) if vals.len() else math.nan
                    rows.append(row)
    if not rows:
        return pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "benchmark": pl.Utf8, "strategy": pl.Utf8,
                                    "n_seeds": pl.Int64, "step": pl.Int64, "n_examples": pl.Int64})
    df = pl.DataFrame(rows, infer_schema_length=None).with_columns(_bench_index(res))
    return in_paper_order(df, ["model", "task", "_bench", "benchmark", "strategy"]).drop("_bench")


def base_split_table(gains: pl.DataFrame, subsets: pl.DataFrame | None = None) -> pl.DataFrame:
    """base_wrong vs base_right vs matched_random vs full (those present), from the gain table.

    `vs_base_right_pct` is the relative difference of final accuracy to base_right's, the
    paper's "+14.3 % relative" comparison.
    """
    sub = gains.filter(pl.col("strategy").is_in(list(BASE_SPLIT_STRATEGIES)))
    cols = ["model", "task", "strategy", "n_seeds", "base_accuracy", "final_accuracy", "gain",
            "gain_ci_low", "gain_ci_high"]
    if sub.height == 0:
        return pl.DataFrame(schema={c: gains.schema[c] for c in cols}
                            | {"n_train": pl.Int64, "vs_base_right_pct": pl.Float64})
    sub = sub.select(cols)
    if subsets is not None and subsets.height:
        sizes = subsets.group_by([*CELL_KEYS, "seed"]).agg(pl.len().alias("n_train")) \
            .group_by(CELL_KEYS).agg(pl.col("n_train").mean().round().cast(pl.Int64))  # per run, seeds alike
        sub = sub.join(sizes, on=CELL_KEYS, how="left")
    else:
        sub = sub.with_columns(pl.lit(None, dtype=pl.Int64).alias("n_train"))
    right = sub.filter(pl.col("strategy") == "base_right").select("model", "task",
                                                                  pl.col("final_accuracy").alias("_right"))
    sub = sub.join(right, on=["model", "task"], how="left").with_columns(
        (100 * (pl.col("final_accuracy") / pl.col("_right") - 1)).alias("vs_base_right_pct")).drop("_right")
    return in_paper_order(sub, CELL_KEYS)


def _bench_index(res: Results) -> pl.Expr:
    """Position of a row's benchmark in its task's list (in-distribution first), for sorting."""
    order = {b: i for benches in res.benchmarks.values() for i, b in enumerate(benches)}
    return pl.col("benchmark").replace_strict(order, default=len(order), return_dtype=pl.Int64).alias("_bench")


def base_per_question(base: pl.DataFrame) -> pl.DataFrame:
    """The base model's outcomes with one row per question: the base is evaluated once per run seed, so
    each question's accuracy is averaged over those evaluations (n = 1, n_correct that fraction) and a
    tier of 20 questions counts 20 examples however many seeds there are."""
    keys = [c for c in ("model", "task", "benchmark", "id", "tier") if c in base.columns]
    return base.group_by(keys, maintain_order=True).agg(
        (pl.col("n_correct") / pl.col("n")).mean().alias("n_correct")).with_columns(pl.lit(1).alias("n"))


def tier_table(res: Results) -> pl.DataFrame:
    """Accuracy (%) per difficulty tier: the base model and each strategy's final checkpoint.

    One row per model x task x benchmark x tier, one column per strategy (mean over seeds), so
    the stratified view reads across; benchmarks without tiers are absent. n_examples: the tier's
    questions, each counted once (the base model's evaluations of every seed averaged per question).
    """
    key = ["model", "task", "benchmark"]
    parts = []
    for (model, task, bench), grp in base_per_question(res.base).group_by(key, maintain_order=True):
        t = accuracy_by_tier(grp.with_columns(pl.lit(0).alias("step")))
        parts.append(t.select(pl.lit(model).alias("model"), pl.lit(task).alias("task"),
                              pl.lit(bench).alias("benchmark"), "tier", "n_examples", pl.lit("base").alias("strategy"),
                              "accuracy"))
    for (model, task, strategy, bench), grp in res.runs.group_by(["model", "task", "strategy", "benchmark"],
                                                                  maintain_order=True):
        last = grp.join(grp.group_by("seed").agg(pl.col("step").max().alias("_last")), on="seed") \
            .filter(pl.col("step") == pl.col("_last"))
        t = pl.concat([accuracy_by_tier(g) for _, g in last.group_by("seed")])
        t = t.group_by("tier").agg(pl.col("accuracy").mean(), pl.col("n_examples").max())
        parts.append(t.select(pl.lit(model).alias("model"), pl.lit(task).alias("task"),
                              pl.lit(bench).alias("benchmark"), "tier", "n_examples",
                              pl.lit(strategy).alias("strategy"), "accuracy"))
    long = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame()
    if long.height == 0:
        return pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "benchmark": pl.Utf8, "tier": pl.Utf8,
                                    "n_examples": pl.Int64, "base": pl.Float64})
    strategies = sorted(set(long["strategy"]) - {"base"}, key=strategy_sort_key)
    wide = long.with_columns(pl.col("accuracy") * 100).pivot(
        on="strategy", index=key + ["tier"], values="accuracy", aggregate_function="first")
    n = long.filter(pl.col("strategy") == "base").select(key + ["tier", "n_examples"])
    wide = wide.join(n, on=key + ["tier"], how="left")
    wide = wide.select(key + ["tier", "n_examples"] + [c for c in ["base", *strategies] if c in wide.columns])
    return sort_tiers(wide.with_columns(_bench_index(res)), before=["model", "task", "_bench"]).drop("_bench")


#: the ood_pass_at_k table's note
OOD_NOTE = ("pass@k in % (unbiased estimator) on every benchmark after a task's first, for the "
            "base model and each strategy's final checkpoint (mean over seeds).")


def base_split_note(split: pl.DataFrame) -> str:
    """The base_split table's note, or why it is empty."""
    return ("Training on examples the base model gets wrong vs right (size-matched), their "
            "size-matched random control and the full pool. vs_base_right_pct: relative difference "
            "of final accuracy to base_right. gain CI: as in accuracy_gain (t over seeds, questions "
            "fixed)." if split.height else
            "No base_wrong / base_right / matched_random / full runs in this configuration.")


def tier_note(tiers: pl.DataFrame) -> str:
    """The tier_accuracy table's note, or why it is empty."""
    return ("Accuracy in % per difficulty tier: the base model and each strategy's final "
            "checkpoint (mean over seeds)." if tiers.height else
            "No benchmark of this configuration has tiers.")
