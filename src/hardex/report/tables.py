"""The report's tables and the learnable-% regression, from the frames of `report.loading`.

Conventions: see `hardex.report`. Every table is a function of plain frames, so a notebook can
recompute what the report shows.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import polars as pl

from hardex.metrics import accuracy_by_tier, expected_mixed, learnable_pct, sort_tiers, summarize
from hardex.report import AnalysisError
from hardex.report.catch_up import catch_up_table
from hardex.report.reference import with_reference
from hardex.report.loading import Results, load_overlaps
from hardex.report.statistics import bootstrap_mean_interval, regression, t_interval
from hardex.selection import BASE_SPLIT_STRATEGIES, BUDGET_STRATEGIES, strategy_sort_key

RUN_KEYS = ["model", "task", "strategy", "seed"]
CELL_KEYS = ["model", "task", "strategy"]


_LEADING = {"pool": -2, "base": -1}  # rows that are not strategies come first


def _order(df: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
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


def _acc(df: pl.DataFrame) -> float:
    return float((df["n_correct"] / df["n"]).mean()) if df.height else math.nan


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
    return _order(df, ["model", "task", "strategy", "seed", "benchmark", "step"])


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
        base_acc, final_acc = _acc(base), _acc(run.filter(pl.col("step") == final_step))
        rows.append({"model": model, "task": task, "strategy": strategy, "seed": seed, "benchmark": bench,
                     "final_step": final_step, "base_accuracy": 100 * base_acc, "final_accuracy": 100 * final_acc,
                     "gain": 100 * (final_acc - base_acc), "learnable_pct": learnable_pct(steps) if steps.height else math.nan,
                     "n_steps": steps.height})
    return _order(pl.DataFrame(rows), RUN_KEYS)


def paired_differences(res: Results, model: str, task: str, strategy: str, seed: int) -> np.ndarray:
    """Per test example: final-checkpoint correct share minus the base model's (in-distribution)."""
    bench = res.in_distribution(task)
    run = res.runs.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("strategy") == strategy)
                          & (pl.col("seed") == seed) & (pl.col("benchmark") == bench))
    run = run.filter(pl.col("step") == run["step"].max())
    base = base_outcomes(res, model, task, bench, seed).group_by("id").agg((pl.col("n_correct") / pl.col("n")).mean()
                                                                           .alias("b"))
    j = run.select("id", (pl.col("n_correct") / pl.col("n")).alias("f")).join(base, on="id", how="inner")
    return (j["f"] - j["b"]).to_numpy()


def gain_table(res: Results, level: float = 0.95, n_boot: int = 2000, seed: int = 0,
               summary: pl.DataFrame | None = None) -> pl.DataFrame:
    """Table 1: per model x task x strategy, base and final accuracy (%), gain (points) and its interval."""
    summary = run_summary(res) if summary is None else summary
    rows = []
    for (model, task, strategy), grp in summary.group_by(CELL_KEYS, maintain_order=True):
        gains = grp["gain"].to_numpy()
        if grp.height > 1:
            lo, hi = t_interval(gains, level)
            method = f"t over {grp.height} seeds"
        else:
            d = paired_differences(res, model, task, strategy, int(grp["seed"][0]))
            lo, hi = (100 * v for v in bootstrap_mean_interval(d, level, n_boot, seed))
            method = f"bootstrap over {d.size} examples"
        rows.append({"model": model, "task": task, "strategy": strategy, "benchmark": grp["benchmark"][0],
                     "n_seeds": grp.height, "final_step": int(grp["final_step"].max()),
                     "base_accuracy": float(grp["base_accuracy"].mean()),
                     "final_accuracy": float(grp["final_accuracy"].mean()), "gain": float(gains.mean()),
                     "gain_ci_low": lo, "gain_ci_high": hi, "interval": method})
    return _order(pl.DataFrame(rows), CELL_KEYS)


def learnable_table(summary: pl.DataFrame, level: float = 0.95) -> pl.DataFrame:
    """Table 2: learnable % per model x task x strategy (mean over seeds; t-interval with >1 seed)."""
    rows = []
    for (model, task, strategy), grp in summary.group_by(CELL_KEYS, maintain_order=True):
        v = grp["learnable_pct"].to_numpy()
        lo, hi = t_interval(v, level)
        rows.append({"model": model, "task": task, "strategy": strategy, "n_seeds": grp.height,
                     "n_steps": int(grp["n_steps"].max()), "learnable_pct": float(np.nanmean(v)) if v.size else math.nan,
                     "learnable_ci_low": lo, "learnable_ci_high": hi})
    return _order(pl.DataFrame(rows), CELL_KEYS)


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
    return _order(df, ["model", "task", "_bench", "benchmark", "strategy"]).drop("_bench")


def base_split_table(gains: pl.DataFrame, subsets: pl.DataFrame | None = None) -> pl.DataFrame:
    """base_wrong vs base_right vs matched_random vs full (those present), from the gain table.

    `vs_base_right_pct` is the relative difference of final accuracy to base_right's, the
    paper's "+14.3 % relative" comparison.
    """
    sub = gains.filter(pl.col("strategy").is_in(list(BASE_SPLIT_STRATEGIES)))
    cols = ["model", "task", "strategy", "n_seeds", "base_accuracy", "final_accuracy", "gain",
            "gain_ci_low", "gain_ci_high"]
    if sub.height == 0:
        return pl.DataFrame(schema={c: gains.schema[c] for c in cols} | {"n_train": pl.Int64, "vs_base_right_pct": pl.Float64})
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
    return _order(sub, CELL_KEYS)


def _bench_index(res: Results) -> pl.Expr:
    """Position of a row's benchmark in its task's list (in-distribution first), for sorting."""
    order = {b: i for benches in res.benchmarks.values() for i, b in enumerate(benches)}
    return pl.col("benchmark").replace_strict(order, default=len(order), return_dtype=pl.Int64).alias("_bench")


def tier_table(res: Results) -> pl.DataFrame:
    """Accuracy (%) per difficulty tier: the base model and each strategy's final checkpoint.

    One row per model x task x benchmark x tier, one column per strategy (mean over seeds), so
    the stratified view reads across; benchmarks without tiers are absent.
    """
    key = ["model", "task", "benchmark"]
    parts = []
    for (model, task, bench), grp in res.base.group_by(key, maintain_order=True):
        t = accuracy_by_tier(grp.with_columns(pl.lit(0).alias("step")))
        parts.append(t.select(pl.lit(model).alias("model"), pl.lit(task).alias("task"), pl.lit(bench).alias("benchmark"),
                              "tier", "n_examples", pl.lit("base").alias("strategy"), "accuracy"))
    for (model, task, strategy, bench), grp in res.runs.group_by(["model", "task", "strategy", "benchmark"],
                                                                  maintain_order=True):
        last = grp.join(grp.group_by("seed").agg(pl.col("step").max().alias("_last")), on="seed") \
            .filter(pl.col("step") == pl.col("_last"))
        t = pl.concat([accuracy_by_tier(g) for _, g in last.group_by("seed")])
        t = t.group_by("tier").agg(pl.col("accuracy").mean(), pl.col("n_examples").max())
        parts.append(t.select(pl.lit(model).alias("model"), pl.lit(task).alias("task"), pl.lit(bench).alias("benchmark"),
                              "tier", "n_examples", pl.lit(strategy).alias("strategy"), "accuracy"))
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


def pool_distribution(probes: pl.DataFrame) -> pl.DataFrame:
    """The pool's pass-rate distribution: examples per pass-rate value (j / K) per model x task."""
    return (probes.group_by(["model", "task", "pass_rate"]).agg(pl.len().cast(pl.Int64).alias("n_examples"))
            .with_columns((100 * pl.col("n_examples") / pl.col("n_examples").sum().over(["model", "task"]))
                          .alias("share_pct"))
            .sort(["model", "task", "pass_rate"]))


def with_expected_mixed(probes: pl.DataFrame, subsets: pl.DataFrame, generations: dict[str, int]
                        ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Probe and subset rows with `expected_mixed` for each example, for the group size G of its
    model's GRPO runs (`generations`: model -> G)."""
    def add(df: pl.DataFrame) -> pl.DataFrame:
        rows = zip(df["model"], df["pass_rate"], df["k"])
        values = [expected_mixed(round(rate * k), k, generations[m]) for m, rate, k in rows]
        return df.with_columns(pl.Series("expected_mixed", values, dtype=pl.Float64))

    probes = add(probes)
    subsets = subsets.join(probes.select("model", "task", "id", "k", "expected_mixed"),
                           on=["model", "task", "id"], how="left")
    return probes, subsets


def subset_pass_rates(probes: pl.DataFrame, subsets: pl.DataFrame,
                      generations: dict[str, int] | None = None) -> pl.DataFrame:
    """Size and pass-rate summary of the pool ("pool" rows) and of each selected subset; with
    `generations`, also the learnable % expected before any training (mean of `expected_mixed`)."""
    cols = ["model", "task", "strategy", "seed", "pass_rate"]
    if generations is not None:
        probes, subsets = with_expected_mixed(probes, subsets, generations)
        cols.append("expected_mixed")
    pool = probes.with_columns(pl.lit("pool").alias("strategy"), pl.lit(0, dtype=pl.Int64).alias("seed"))
    both = pl.concat([pool.select(cols), subsets.select(cols)], how="vertical_relaxed")
    # one subset per run seed: sizes per seed, pass rates over every seed's draw
    aggs = [(pl.len() / pl.col("seed").n_unique()).round().cast(pl.Int64).alias("n_examples"),
            pl.col("pass_rate").mean().alias("mean_pass_rate"),
            pl.col("pass_rate").median().alias("median_pass_rate"), pl.col("pass_rate").min().alias("min_pass_rate"),
            pl.col("pass_rate").max().alias("max_pass_rate")]
    if generations is not None:
        aggs.append((100 * pl.col("expected_mixed").mean()).alias("expected_learnable_pct"))
    aggs.append((pl.col("pass_rate").is_between(0, 1, closed="none").sum() / pl.col("seed").n_unique())
                .alias("learnable_examples"))
    table = both.group_by(CELL_KEYS).agg(aggs).join(subset_ties(probes, subsets), on=CELL_KEYS, how="left")
    return _order(table, CELL_KEYS)


def subset_ties(probes: pl.DataFrame, subsets: pl.DataFrame) -> pl.DataFrame:
    """Per model x task x strategy, `tied_at`: the pass rate every seed's subset was drawn from when each
    is a random draw inside one tie of pass rates larger than itself (`learnability.tie`), else null.
    Two strategies tied at the same rate trained on the same kind of examples."""
    from hardex.learnability import tie

    rows = []
    for (model, task, strategy), grp in subsets.group_by(CELL_KEYS):
        probe = probes.filter((pl.col("model") == model) & (pl.col("task") == task))
        found = {tie(seed_rows, probe) for _, seed_rows in grp.group_by("seed")}
        rate = next(iter(found))[0] if len(found) == 1 and None not in found else None
        rows.append({"model": model, "task": task, "strategy": strategy, "tied_at": rate})
    return pl.DataFrame(rows, schema={"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8, "tied_at": pl.Float64})


def ties_note(subsets_table: pl.DataFrame) -> str:
    """The table note's sentence naming strategies whose subsets collapsed into one tie, or ''."""
    tied = subsets_table.filter(pl.col("tied_at").is_not_null())
    if tied.height == 0:
        return ""
    parts = [f"{r['model']}/{r['task']} {r['strategy']} at {r['tied_at']:g}" for r in tied.iter_rows(named=True)]
    return (" tied_at: the subset is a seeded random draw among pool examples that all share this pass rate, "
            "so the ranking chose nothing and strategies tied at the same rate train on the same kind of "
            "examples: " + "; ".join(parts) + ".")


def rollout_budget(gains: pl.DataFrame, steps: pl.DataFrame, probes: pl.DataFrame) -> pl.DataFrame:
    """What each model x task x strategy cost in generated completions (rollouts) and tokens, beside its
    gain, so that offline selection and online filtering compare at equal compute.

    probe: the probe samples that chose the subset, charged in full to every strategy that reads pass
    rates (their subsets all come from one probe of the whole pool); none for random, full, the tier
    strategies and the base-model splits (those read one greedy answer per example, not counted).
    train: completions trained on; discarded: completions of groups online filtering dropped. Means
    over seeds. Tokens where a step did not record them (TRL's own generate) are its mean completion
    length times its rollouts.
    """
    from hardex.selection import BOUNDARY_STRATEGIES, FILTER_STRATEGIES, offline_strategy

    if steps.height == 0 or "rollouts_generated" not in steps.columns:
        return pl.DataFrame()
    steps = steps.with_columns(
        pl.col("rollouts_discarded").fill_null(0),
        pl.col("tokens_generated").fill_null((pl.col("completion_length") * pl.col("rollouts_generated")).round()),
        pl.col("filter_capped").fill_null(False),  # recorded with the rollout counts (STEP_COLUMNS)
    )
    runs = steps.group_by(RUN_KEYS).agg(
        (pl.col("rollouts_generated") - pl.col("rollouts_discarded")).sum().alias("train_rollouts"),
        pl.col("rollouts_discarded").sum().alias("discarded_rollouts"),
        pl.col("tokens_generated").sum().alias("generated_tokens"),
        pl.col("filter_capped").sum().alias("capped_steps"),
    )
    if "tokens" not in probes.columns:
        probes = probes.with_columns(pl.lit(None, dtype=pl.Int64).alias("tokens"))
    probe_cost = probes.group_by("model", "task").agg(pl.col("k").sum().alias("pool_probe_rollouts"),
                                                      pl.col("tokens").sum().alias("pool_probe_tokens"))
    reads_probe = [s for s in runs["strategy"].unique() if offline_strategy(s)[0] in BOUNDARY_STRATEGIES + FILTER_STRATEGIES]
    cells = runs.group_by(CELL_KEYS).agg(pl.col("train_rollouts", "discarded_rollouts", "generated_tokens",
                                                "capped_steps").mean())
    cells = cells.join(probe_cost, on=["model", "task"], how="left").with_columns(
        pl.when(pl.col("strategy").is_in(reads_probe)).then(pl.col("pool_probe_rollouts")).otherwise(0)
        .alias("probe_rollouts"),
        pl.when(pl.col("strategy").is_in(reads_probe)).then(pl.col("pool_probe_tokens")).otherwise(0)
        .alias("probe_tokens"),
    ).with_columns(
        (pl.col("probe_rollouts") + pl.col("train_rollouts") + pl.col("discarded_rollouts")).alias("total_rollouts"),
        (pl.col("probe_tokens") + pl.col("generated_tokens")).alias("total_tokens"),
    ).with_columns((100 * pl.col("probe_rollouts") / pl.col("total_rollouts")).alias("probe_share_pct"))
    out = cells.join(gains.select(*CELL_KEYS, "n_seeds", "gain", "gain_ci_low", "gain_ci_high"), on=CELL_KEYS,
                     how="left")
    return _order(out.select(*CELL_KEYS, "n_seeds", "probe_rollouts", "train_rollouts", "discarded_rollouts",
                             "total_rollouts", "probe_share_pct", "probe_tokens", "generated_tokens", "total_tokens",
                             "capped_steps", "gain", "gain_ci_low", "gain_ci_high"), CELL_KEYS)


def regression_cells(summary: pl.DataFrame, strategies: Sequence[str] | None = None) -> pl.DataFrame:
    """The regression's points: one per model x task x strategy (of `strategies`; all when None),
    gain and learnable % each averaged over the cell's seeds, `n_seeds` the seeds averaged.

    Seeds of a cell share a subset and a base evaluation, so they are not independent points: a fit
    over seeds would count them as such and give intervals that are too narrow.
    """
    pts = summary.filter(pl.col("learnable_pct").is_not_nan() & pl.col("gain").is_not_nan())
    if strategies is not None:
        pts = pts.filter(pl.col("strategy").is_in(list(strategies)))
    cells = pts.group_by(CELL_KEYS).agg(pl.len().cast(pl.Int64).alias("n_seeds"), pl.col("learnable_pct").mean(),
                                        pl.col("gain").mean())
    return _order(cells, CELL_KEYS)


def _cell_fit(cells: pl.DataFrame, strategies: Sequence[str], level: float, n_boot: int, seed: int) -> dict[str, Any]:
    fit = regression(cells["learnable_pct"].to_numpy(), cells["gain"].to_numpy(), level, n_boot, seed)
    seeds = cells["n_seeds"]
    return {**fit, "x": "learnable_pct", "y": "gain",
            "points_are": "one per model x task x strategy (cell), seeds averaged; the bootstrap resamples cells",
            "strategies": list(strategies), "n_cells": cells.height,
            "seeds_per_cell": {"min": seeds.min(), "max": seeds.max()} if cells.height else None,
            "points": cells.to_dicts()}


def regression_report(summary: pl.DataFrame, level: float = 0.95, n_boot: int = 2000, seed: int = 0,
                      ref: pl.DataFrame | None = None, names: dict | None = None,
                      strategies: Sequence[str] = BUDGET_STRATEGIES) -> dict[str, Any]:
    """Gain on learnable % over the cells of `strategies` (`regression_cells`: seeds averaged, the
    bootstrap resampling cells), with its points; and the same fit on every published run when a
    reference is given (one run per cell: the paper's 32 points)."""
    cells = regression_cells(summary, strategies)
    out: dict[str, Any] = {"this_run": _cell_fit(cells, strategies, level, n_boot, seed)}
    if ref is not None and {"learnable_pct", "gain"} <= set(ref.columns):
        published = regression_cells(ref)
        out["published"] = _cell_fit(published, sorted(set(published["strategy"]), key=strategy_sort_key),
                                     level, n_boot, seed)
    return _json_safe(out)


def _json_safe(obj: Any) -> Any:
    """NaN and infinities become null (JSON has neither)."""
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


TABLES = {
    "accuracy_gain": "Accuracy gain over the base model (Table 1)",
    "learnable": "Learnable % of training steps (Table 2)",
    "ood_pass_at_k": "Out-of-distribution pass@k (Table 4)",
    "base_split": "Base-wrong vs base-right vs size-matched random vs full pool",
    "tier_accuracy": "Accuracy per difficulty tier, base model and final checkpoint",
    "pool_pass_rates": "Pass-rate distribution of the training pool",
    "subset_pass_rates": "Pass rates of each selected subset",
    "catch_up": "Final accuracy against the full-pool run's, and the share of its steps at which each run reaches it (paper 2's catch-up)",
    "data_overlap": "Pool against benchmarks: questions in both",
    "rollout_budget": "Rollouts and tokens generated per strategy, probing included, against its gain",
}


def build_tables(res: Results, probes: pl.DataFrame, subsets: pl.DataFrame, level: float = 0.95,
                 n_boot: int = 2000, seed: int = 0, ref: pl.DataFrame | None = None,
                 names: dict | None = None, generations: dict[str, int] | None = None,
                 overlaps: pl.DataFrame | None = None) -> dict[str, tuple[pl.DataFrame, str]]:
    """Every table of the report as {name: (frame, note)}; published columns added when `ref` is given;
    the learnable % expected from the probe beside the measured one when `generations` (model -> G) is."""
    summary = run_summary(res)
    pct = f"{round(100 * level)} %"
    gains = gain_table(res, level, n_boot, seed, summary)
    learn = learnable_table(summary, level)
    ood = ood_table(res)
    split = base_split_table(gains, subsets)
    tiers = tier_table(res)
    pool = pool_distribution(probes)
    subs = subset_pass_rates(probes, subsets, generations)
    budget = rollout_budget(gains, res.steps, probes)
    catch = catch_up_table(res.runs, level, base=res.base).with_row_index("_row")  # strategies in paper order, rows kept
    catch = _order(catch, ["model", "task", "strategy", "_row"]).drop("_row")
    no_verdict = (" Rows with a single seed on a side have no interval, so matches is empty: run several seeds "
                  "to tell a match from noise." if catch["matches"].null_count() else "")
    expected_note = ""
    if generations is not None:
        learn = learn.join(subs.select(*CELL_KEYS, "expected_learnable_pct"), on=CELL_KEYS, how="left")
        expected_note = (" expected_learnable_pct: predicted before training from the probe, the mean chance "
                         "that a group of G samples of the base model mixes right and wrong answers; the "
                         "subsets were chosen on those same samples, so it reads low for the hardest and high "
                         "for the easiest, and training moves the policy away from the base model.")
    gains_out = with_reference(gains, ref, {"base_accuracy": "published_base_accuracy",
                                            "final_accuracy": "published_final_accuracy",
                                            "gain": "published_gain"}, names)
    learn_out = with_reference(learn, ref, {"learnable_pct": "published_learnable_pct"}, names)
    ref_note = ""
    if ref is not None:
        matched = gains_out["published_gain"].is_not_null().sum()
        ref_note = (f" Published columns: the reference run with the same model, task and strategy "
                    f"(names mapped by report.reference_names); {matched} of {gains_out.height} rows matched.")
    return {
        "accuracy_gain": (gains_out, f"Accuracy in % on each task's first (in-distribution) benchmark; gain in points "
                                     f"(final checkpoint minus base model). {pct} interval: t over seeds with >1 seed, "
                                     f"paired bootstrap over test examples ({n_boot} resamples) with one." + ref_note),
        "learnable": (learn_out, "Learnable % = 100 x mean over training steps of the share of groups whose rewards "
                                 f"differ (nonzero std). {pct} t-interval over seeds when there are several."
                                 + expected_note + ref_note),
        "ood_pass_at_k": (ood, "pass@k in % (unbiased estimator) on every benchmark after a task's first, for the "
                               "base model and each strategy's final checkpoint (mean over seeds)."),
        "base_split": (split, "Training on examples the base model gets wrong vs right (size-matched), their "
                              "size-matched random control and the full pool. vs_base_right_pct: relative difference "
                              "of final accuracy to base_right." if split.height else
                       "No base_wrong / base_right / matched_random / full runs in this configuration."),
        "tier_accuracy": (tiers, "Accuracy in % per difficulty tier: the base model and each strategy's final "
                                 "checkpoint (mean over seeds)." if tiers.height else
                          "No benchmark of this configuration has tiers."),
        "pool_pass_rates": (pool, "Pool examples per probe pass rate (correct samples / K)."),
        "subset_pass_rates": (subs, "Size and pass rates of the pool and of each selected subset; learnable_examples: "
                                    "those with 0 < pass rate < 1 (mean over seeds), the only ones whose GRPO groups "
                                    "can mix rewards." + expected_note + ties_note(subs)),
        "catch_up": (catch, "Each strategy against the run on the full pool (strategy full), at the end of both, on "
                            "each benchmark, overall and per tier. steps: the run's last checkpoint; share_pct = 100 x "
                            "steps / the full run's steps. accuracy, full_accuracy: final accuracy in % (mean over "
                            f"seeds); difference: strategy minus full in points, with its {pct} t-interval across "
                            "seeds (paired by seed number when both ran the same seeds, Welch's otherwise; none with "
                            "one seed); matches: the interval's upper end >= 0, i.e. not shown worse than the full run "
                            "(empty without an interval). catch_up_pct: the share of the full run's steps (mean over seeds) "
                            "at which the run first reaches the full run's final accuracy of the same seed, the base "
                            "model (base_accuracy) counting as step 0, so a full run that ends below the base model is "
                            "caught up with at 0 %; with its t-interval (low end stopped at 0); given only when "
                            "every seed reaches it, reached_seeds of n_seeds did. Paper 2: the lower tiers alone "
                            "match the full run with ~45 % of its steps." + no_verdict if catch.height else
                     "No run on the full pool (strategy full) in this configuration: nothing to catch up with."),
        "data_overlap": (overlaps if overlaps is not None else load_overlaps([]),
                         "Questions of each benchmark that are also in the task's pool: exact, only after "
                         "normalizing case, spacing and punctuation, or as the same problem in other words or order "
                         "(same_problem: a generated family's canonical form, e.g. 4 + 3 for 3 + 4). A task with more "
                         "than tasks.<task>.allow_overlap (allowed) of them stops before probing: its gain would be "
                         "measured on training data. near_duplicates: the other benchmark questions with the same "
                         "numbers and operators as a pool question (same_numbers) or an 8-word run in common "
                         "(shared_ngram, template wording left out); refused beyond "
                         "tasks.<task>.allow_near_duplicates (allowed_near; empty: reported only). Where pool and "
                         "benchmark both have a canonical form, it decides alone."),
        "rollout_budget": (budget, "Completions (rollouts) and tokens each strategy generated, mean over seeds. "
                                   "probe: the probe samples of the whole pool, charged to every strategy that "
                                   "selects by pass rate (hard, medium, easy, band, learnable and their _online "
                                   "runs), none to the others; train: completions trained on; discarded: those of "
                                   "groups online filtering dropped for agreeing rewards; capped_steps: steps where "
                                   "it reached grpo.online_max_rounds. Tokens: new tokens, EOS included (TRL's own "
                                   "generate records none: its mean completion length times its rollouts). Gain as "
                                   f"in accuracy_gain, with its {pct} interval." if budget.height else
                           "No run recorded its rollouts (results from before the count was kept)."),
    }
