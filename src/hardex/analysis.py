"""Analysis: the papers' tables and the learnable-% regression, from the workflow's result files.

Everything here is a function of plain frames (or the files they are read from), so the numbers a
report shows can be recomputed in a notebook. Conventions shared by every table:

- accuracies and gains are in percentage points (the published CSV's fractions are converted);
- "final" is the last checkpoint of a run, and Table 1's numbers use the task's first benchmark
  (the in-distribution test set); every other benchmark of a task counts as out-of-distribution;
- a 95 % interval (the level is a parameter) is a t-interval across seeds when a cell has several
  seeds, and a paired bootstrap over test examples when it has one.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import polars as pl

from hardex.evaluation import accuracy_by_tier, sort_tiers, summarize
from hardex.io import parquet_columns, read_parquet
from hardex.training import learnable_pct

RUN_KEYS = ["model", "task", "strategy", "seed"]
CELL_KEYS = ["model", "task", "strategy"]
BASE_SPLIT_STRATEGIES = ("base_wrong", "base_right", "matched_random", "full")
# Display order of strategies in tables and legends (paper 1 first; other names after, alphabetically).
STRATEGY_ORDER = ("hard", "medium", "easy", "random", "base_wrong", "base_right", "matched_random", "full")
# Strategies whose cells the learnable-% regression fits by default: paper 1's four (its 32 points).
REGRESSION_STRATEGIES = ("hard", "medium", "easy", "random")

_SEP = r"[/\\]"
_NAME = r"[^/\\]+"
EVAL_RUN_RE = re.compile(rf"(?P<model>{_NAME}){_SEP}(?P<task>{_NAME}){_SEP}(?P<strategy>{_NAME}){_SEP}seed(?P<seed>\d+)\.parquet$")
EVAL_BASE_RE = re.compile(rf"(?P<model>{_NAME}){_SEP}base{_SEP}(?P<task>{_NAME})\.parquet$")
STEPS_RE = re.compile(rf"(?P<model>{_NAME}){_SEP}(?P<task>{_NAME}){_SEP}(?P<strategy>{_NAME}){_SEP}seed(?P<seed>\d+){_SEP}steps\.parquet$")
PROBE_RE = re.compile(rf"(?P<model>{_NAME}){_SEP}(?P<task>{_NAME})\.parquet$")
SUBSET_RE = re.compile(rf"(?P<model>{_NAME}){_SEP}(?P<task>{_NAME}){_SEP}(?P<strategy>{_NAME}){_SEP}seed(?P<seed>\d+)\.parquet$")

OUTCOME_COLUMNS = ["step", "benchmark", "id", "tier", "n", "n_correct"]


class AnalysisError(ValueError):
    """Result files that cannot be analysed together (say which file and why)."""


# ---- loading ---------------------------------------------------------------------------------------


def _keys(regex: re.Pattern, path: str | Path) -> dict[str, Any]:
    m = regex.search(str(path))
    if not m:
        raise AnalysisError(f"{path}: not a path of the results layout ({regex.pattern})")
    d = m.groupdict()
    if "seed" in d:
        d["seed"] = int(d["seed"])
    return d


def _with_keys(df: pl.DataFrame, keys: dict[str, Any]) -> pl.DataFrame:
    return df.with_columns([pl.lit(v, dtype=pl.Int64 if k == "seed" else pl.Utf8).alias(k) for k, v in keys.items()])


@dataclass
class Results:
    """Per-example outcomes of every run and of the base model, and every run's step record.

    `runs`: model, task, strategy, seed, step, benchmark, id, tier, n, n_correct.
    `base`: model, task, benchmark, id, tier, n, n_correct (step 0).
    `steps`: model, task, strategy, seed + the columns of steps.parquet.
    `benchmarks`: task -> its benchmarks, the in-distribution one first.
    `pass_k`: benchmark -> the k values of its pass@k.
    """

    runs: pl.DataFrame
    base: pl.DataFrame
    steps: pl.DataFrame
    benchmarks: dict[str, list[str]]
    pass_k: dict[str, list[int]] = field(default_factory=dict)

    def in_distribution(self, task: str) -> str:
        return self.benchmarks[task][0]

    def ood(self, task: str) -> list[str]:
        return self.benchmarks[task][1:]


def load_results(
    eval_files: Iterable[str | Path],
    base_files: Iterable[str | Path],
    steps_files: Iterable[str | Path] = (),
    benchmarks: dict[str, Sequence[str]] | None = None,
    pass_k: dict[str, Sequence[int]] | None = None,
) -> Results:
    """Read result files of the standard layout; model/task/strategy/seed come from their paths.

    `benchmarks` (task -> benchmarks, first = in-distribution) is the config's; without it the
    order in which benchmarks first appear in the base files is used.
    """
    run_keys = [(f, _keys(EVAL_RUN_RE, f)) for f in eval_files]  # a stray path fails before any read
    base_keys = [(f, _keys(EVAL_BASE_RE, f)) for f in base_files]
    runs = [_with_keys(read_parquet(f, columns=OUTCOME_COLUMNS), k) for f, k in run_keys]
    # the base model is evaluated once per run seed (column seed), with that seed's evaluation noise
    bases = [_with_keys(read_parquet(f, columns=[c for c in ["seed", *OUTCOME_COLUMNS] if c in have]), k)
             for f, k in base_keys for have in [parquet_columns(f)]]
    if not runs or not bases:
        raise AnalysisError("no evaluation results to analyse (need run and base evaluation files)")
    runs_df = pl.concat(runs, how="diagonal_relaxed")
    base_df = pl.concat(bases, how="diagonal_relaxed").drop("step")
    if "seed" not in base_df.columns:
        base_df = base_df.with_columns(pl.lit(None, dtype=pl.Int64).alias("seed"))
    steps_df = load_steps(steps_files)
    if benchmarks is None:
        benchmarks = {}
        for (task,), grp in base_df.group_by(["task"], maintain_order=True):
            benchmarks[task] = list(dict.fromkeys(grp["benchmark"].to_list()))
    benchmarks = {t: list(b) for t, b in benchmarks.items()}
    if pass_k is None:
        pass_k = {}
        for (bench,), grp in base_df.group_by(["benchmark"], maintain_order=True):
            n = int(grp["n"].min())
            pass_k[bench] = sorted({1, n})
    return Results(runs_df, base_df, steps_df, benchmarks, {b: list(k) for b, k in pass_k.items()})


def load_steps(steps_files: Iterable[str | Path]) -> pl.DataFrame:
    """Every run's steps.parquet, with model, task, strategy and seed from its path."""
    steps = [_with_keys(read_parquet(f), _keys(STEPS_RE, f)) for f in steps_files]
    if not steps:
        return pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8, "seed": pl.Int64,
                                    "step": pl.Int64, "frac_zero_std": pl.Float64})
    return pl.concat(steps, how="diagonal_relaxed")


def load_pool(probe_files: Iterable[str | Path], subset_files: Iterable[str | Path]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(probe tables with model, task; subsets with model, task, strategy, seed) from the standard layout."""
    probes = [_with_keys(read_parquet(f, columns=["id", "k", "pass_rate"]), _keys(PROBE_RE, f)) for f in probe_files]
    subsets = [_with_keys(read_parquet(f, columns=["id", "pass_rate"]), _keys(SUBSET_RE, f)) for f in subset_files]
    if not probes:
        raise AnalysisError("no probe tables to analyse")
    empty_subsets = pl.DataFrame(schema={"id": pl.Utf8, "pass_rate": pl.Float64, "model": pl.Utf8,
                                         "task": pl.Utf8, "strategy": pl.Utf8, "seed": pl.Int64})
    return pl.concat(probes, how="diagonal_relaxed"), (pl.concat(subsets, how="diagonal_relaxed") if subsets else empty_subsets)


def model_parameters(sizes_b: dict[str, float], built: dict[str, str | Path]) -> dict[str, float]:
    """Parameters of each model: counted by the build (its build_summary.json) for a model the workflow
    built, else the config's size_b (billions)."""
    import json

    out = {m: 1e9 * float(b) for m, b in sizes_b.items()}
    for m, folder in built.items():
        out[m] = float(json.loads((Path(folder) / "build_summary.json").read_text())["parameters"])
    return out


def strategy_sort_key(strategy: str) -> tuple[int, str]:
    """Paper order first (hard, medium, easy, random, ...), unknown names after, alphabetically."""
    return (STRATEGY_ORDER.index(strategy), "") if strategy in STRATEGY_ORDER else (len(STRATEGY_ORDER), strategy)


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


# ---- statistics ------------------------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes 6.4)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(lbeta) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbeta) * _betacf(b, a, 1 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function (numpy has none and scipy is not a dependency)."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_ppf(p: float, df: float) -> float:
    """Quantile of Student's t (bisection on t_cdf; ample precision for intervals)."""
    if not 0 < p < 1:
        raise ValueError(f"quantile level {p} outside (0, 1)")
    if p == 0.5:
        return 0.0
    lo, hi = -1.0, 1.0
    while t_cdf(lo, df) > p:
        lo *= 2
    while t_cdf(hi, df) < p:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Interval for the mean across seeds: mean +- t * sd / sqrt(n) (NaN with fewer than 2)."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return (math.nan, math.nan)
    half = t_ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    return (float(v.mean() - half), float(v.mean() + half))


def bootstrap_mean_interval(values: Sequence[float], level: float = 0.95, n_boot: int = 2000,
                            seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of a mean (resampling the values with replacement).

    With per-example differences final - base this is the paired bootstrap over test examples.
    """
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    chunk = max(1, 2_000_000 // max(1, v.size))  # bounded memory for large test sets
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        means[start:stop] = v[rng.integers(0, v.size, size=(stop - start, v.size))].mean(axis=1)
    alpha = (1 - level) / 2
    return (float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha)))


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(slope, intercept, R²) of y on x; NaN where x has no spread."""
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    if x.size < 2 or sxx == 0:
        return (math.nan, math.nan, math.nan)
    slope = float(((x - xm) * (y - ym)).sum()) / sxx
    intercept = float(ym - slope * xm)
    sst = float(((y - ym) ** 2).sum())
    sse = float(((y - intercept - slope * x) ** 2).sum())
    r2 = 1.0 - sse / sst if sst > 0 else math.nan
    return (slope, intercept, r2)


def regression(x: Sequence[float], y: Sequence[float], level: float = 0.95, n_boot: int = 2000,
               seed: int = 0) -> dict[str, Any]:
    """OLS of y on x with percentile bootstrap intervals (resampling points) for each estimate.

    Also the t-based standard errors, which the confidence band of the plotted fit uses.
    Resamples whose x has no spread are skipped (they have no slope).
    """
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[keep], ya[keep]
    n = int(xa.size)
    slope, intercept, r2 = _ols(xa, ya)
    out: dict[str, Any] = {"n": n, "slope": slope, "intercept": intercept, "r2": r2, "ci_level": level,
                           "n_boot": n_boot, "bootstrap_seed": seed}
    if n > 2 and math.isfinite(slope):
        resid = ya - intercept - slope * xa
        s2 = float((resid**2).sum()) / (n - 2)
        sxx = float(((xa - xa.mean()) ** 2).sum())
        out.update(residual_se=math.sqrt(s2), slope_se=math.sqrt(s2 / sxx),
                   intercept_se=math.sqrt(s2 * (1.0 / n + xa.mean() ** 2 / sxx)), x_mean=float(xa.mean()), sxx=sxx)
    boots = []
    if n >= 3:
        rng = np.random.default_rng(seed)
        for _ in range(n_boot):
            idx = rng.integers(0, n, size=n)
            est = _ols(xa[idx], ya[idx])
            if math.isfinite(est[0]):
                boots.append(est)
    alpha = (1 - level) / 2
    b = np.array(boots) if boots else np.empty((0, 3))
    for j, name in enumerate(("slope", "intercept", "r2")):
        col = b[:, j][np.isfinite(b[:, j])] if b.size else b
        out[f"{name}_ci"] = ([float(np.quantile(col, alpha)), float(np.quantile(col, 1 - alpha))]
                             if col.size else [math.nan, math.nan])
    out["n_boot_used"] = int(b.shape[0])
    return out


def confidence_band(fit: dict[str, Any], xs: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fitted y, lower, upper) of the fit's mean response at xs, t-based (the usual OLS band)."""
    xs = np.asarray(xs, dtype=float)
    yhat = fit["intercept"] + fit["slope"] * xs
    if "residual_se" not in fit:
        return yhat, np.full_like(xs, np.nan), np.full_like(xs, np.nan)
    t = t_ppf(0.5 + fit["ci_level"] / 2, fit["n"] - 2)
    half = t * fit["residual_se"] * np.sqrt(1.0 / fit["n"] + (xs - fit["x_mean"]) ** 2 / fit["sxx"])
    return yhat, yhat - half, yhat + half


# ---- per-run quantities ----------------------------------------------------------------------------


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


# ---- tables ----------------------------------------------------------------------------------------


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


def expected_mixed(n_correct: int, k: int, g: int) -> float:
    """Chance that a GRPO group of g samples of the probed model mixes right and wrong answers (so it
    has a gradient), from a probe with n_correct of k right: 1 - p^g - (1 - p)^g, estimated without
    bias from the k samples when k >= g (drawing g of them without replacement), else with p = c/k."""
    if k >= g:
        return 1.0 - (math.comb(n_correct, g) + math.comb(k - n_correct, g)) / math.comb(k, g)
    p = n_correct / k
    return 1.0 - p**g - (1.0 - p) ** g


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
    return _order(both.group_by(CELL_KEYS).agg(aggs), CELL_KEYS)


# ---- published reference ---------------------------------------------------------------------------


def reference_path(reference: str | Path) -> Path:
    """A shipped reference name (e.g. hard_examples_published) or a path to a CSV in that schema."""
    ref = str(reference)
    if "/" not in ref and "\\" not in ref and not ref.endswith(".csv"):
        path = resources.files("hardex") / "reference" / f"{ref}.csv"
        if not path.is_file():
            shipped = sorted(p.name[:-4] for p in (resources.files("hardex") / "reference").iterdir()
                             if p.name.endswith(".csv"))
            raise AnalysisError(f"report.reference: no shipped reference {ref!r}; shipped: {', '.join(shipped)}")
        return Path(str(path))
    path = Path(ref)
    if not path.is_file():
        raise AnalysisError(f"report.reference: {ref} is not a file")
    return path


def load_reference(reference: str | Path | None) -> pl.DataFrame | None:
    """The published runs: task, model, strategy, base/final accuracy in %, gain, learnable %, curve.

    Accuracies are converted from fractions to percent, like this project's tables.
    """
    if reference is None:
        return None
    df = pl.read_csv(reference_path(reference))
    missing = {"task", "model", "strategy", "gain_points"} - set(df.columns)
    if missing:
        raise AnalysisError(f"report.reference {reference}: missing columns {sorted(missing)}")
    acc_cols = [c for c in df.columns if c in ("base_accuracy", "final_accuracy") or c.startswith("accuracy_step_")]
    return df.with_columns([(100 * pl.col(c)).alias(c) for c in acc_cols]).rename({"gain_points": "gain"})


def reference_curves(ref: pl.DataFrame) -> pl.DataFrame:
    """Published accuracy (%) per checkpoint step, long form, with the base accuracy as step 0."""
    steps = sorted(int(c.rsplit("_", 1)[1]) for c in ref.columns if c.startswith("accuracy_step_"))
    parts = [ref.select("task", "model", "strategy", pl.lit(0).alias("step"), pl.col("base_accuracy").alias("accuracy"))] \
        if "base_accuracy" in ref.columns else []
    parts += [ref.select("task", "model", "strategy", pl.lit(s).alias("step"),
                         pl.col(f"accuracy_step_{s}").alias("accuracy")) for s in steps]
    if not parts:
        return pl.DataFrame(schema={"task": pl.Utf8, "model": pl.Utf8, "strategy": pl.Utf8, "step": pl.Int32,
                                    "accuracy": pl.Float64})
    return pl.concat(parts, how="vertical_relaxed").sort(["task", "model", "strategy", "step"])


def map_names(df: pl.DataFrame, names: dict[str, dict[str, str]] | None) -> pl.DataFrame:
    """Add ref_model / ref_task / ref_strategy: this run's names translated to the published ones.

    `names` is the config's report.reference_names ({models: {ours: theirs}, tasks: ..., strategies:
    ...}); names not listed are used as they are.
    """
    names = names or {}
    out = df
    for col, key in (("model", "models"), ("task", "tasks"), ("strategy", "strategies")):
        mapping = names.get(key) or {}
        out = out.with_columns(pl.col(col).replace(mapping).alias(f"ref_{col}"))
    return out


def with_reference(table: pl.DataFrame, ref: pl.DataFrame | None, columns: dict[str, str],
                   names: dict[str, dict[str, str]] | None = None) -> pl.DataFrame:
    """Put published values beside this run's: columns {published column: new column name}.

    Rows are matched on model, task and strategy after `names` translates this run's names; a row
    with no published counterpart gets nulls. Without a reference the table is returned unchanged.
    """
    if ref is None:
        return table
    keep = {c: new for c, new in columns.items() if c in ref.columns}
    published = ref.select(pl.col("model").alias("ref_model"), pl.col("task").alias("ref_task"),
                           pl.col("strategy").alias("ref_strategy"), *[pl.col(c).alias(n) for c, n in keep.items()])
    out = map_names(table, names).join(published, on=["ref_model", "ref_task", "ref_strategy"], how="left")
    return out.drop(["ref_model", "ref_task", "ref_strategy"])


# ---- writing tables --------------------------------------------------------------------------------

TABLE_FORMATS = ("md", "csv", "tex", "html")


def _fmt(v: Any, decimals: int) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{decimals}f}"
    return str(v)


def _display(df: pl.DataFrame, decimals: int) -> tuple[list[str], list[list[str]]]:
    """Header and string cells; an interval pair x_ci_low, x_ci_high becomes one "[lo, hi]" column."""
    header, getters = [], []
    cols = list(df.columns)
    skip = set()
    for c in cols:
        if c in skip:
            continue
        if c.endswith("_ci_low") and c.replace("_ci_low", "_ci_high") in cols:
            hi = c.replace("_ci_low", "_ci_high")
            skip.add(hi)
            header.append(c.replace("_ci_low", " CI"))
            getters.append(lambda r, lo=c, hi=hi: "–" if r[lo] is None or (isinstance(r[lo], float) and math.isnan(r[lo]))
                           else f"[{_fmt(r[lo], decimals)}, {_fmt(r[hi], decimals)}]")
        else:
            header.append(c)
            getters.append(lambda r, c=c: _fmt(r[c], decimals))
    cells = [[g(r) for g in getters] for r in df.iter_rows(named=True)]
    return header, cells


def to_markdown(df: pl.DataFrame, decimals: int = 2, title: str | None = None, note: str | None = None) -> str:
    header, cells = _display(df, decimals)
    lines = [f"## {title}", ""] if title else []
    if note:
        lines += [note, ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---:" if all(_numeric(c[i]) for c in cells) and cells else "---"
                                for i in range(len(header))) + "|")
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
    return "\n".join(lines) + "\n"


def _numeric(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return s == "–"


_TEX_ESCAPE = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
               "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}", "–": "--"}


def _tex(s: str) -> str:
    return "".join(_TEX_ESCAPE.get(ch, ch) for ch in s)


def to_latex(df: pl.DataFrame, decimals: int = 2, caption: str | None = None, label: str | None = None) -> str:
    """A booktabs table (needs \\usepackage{booktabs})."""
    header, cells = _display(df, decimals)
    align = "".join("r" if cells and all(_numeric(c[i]) for c in cells) else "l" for i in range(len(header)))
    out = ["\\begin{table}[t]", "\\centering"]
    if caption:
        out.append(f"\\caption{{{_tex(caption)}}}")
    if label:
        out.append(f"\\label{{{label}}}")
    out += [f"\\begin{{tabular}}{{{align}}}", "\\toprule", " & ".join(_tex(h) for h in header) + " \\\\", "\\midrule"]
    out += [" & ".join(_tex(c) for c in row) + " \\\\" for row in cells]
    out += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(out) + "\n"


def to_html(df: pl.DataFrame, decimals: int = 2, title: str | None = None, note: str | None = None) -> str:
    """A standalone HTML page (the Snakemake report shows HTML, not CSV, inline)."""
    import html

    header, cells = _display(df, decimals)
    num = [bool(cells) and all(_numeric(c[i]) for c in cells) for i in range(len(header))]
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="{"num" if num[i] else ""}">{html.escape(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>" for row in cells)
    if not cells:
        body = f'<tr><td colspan="{len(header)}"><em>no rows</em></td></tr>'
    style = ("body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;font-size:13px}"
             "th,td{border-bottom:1px solid #ccc;padding:3px 8px}th{background:#f0f0f0;text-align:left}"
             "td.num{text-align:right;font-variant-numeric:tabular-nums}")
    head = f"<h3>{html.escape(title)}</h3>" if title else ""
    para = f"<p>{html.escape(note)}</p>" if note else ""
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title or '')}</title>"
            f"<style>{style}</style></head><body>{head}{para}<table><thead><tr>{th}</tr></thead>"
            f"<tbody>{body}</tbody></table></body></html>\n")


def _write_text_atomic(text: str, path: Path) -> None:
    """Like hardex.io's writers: a reader never sees a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_table(df: pl.DataFrame, stem: str | Path, title: str, note: str | None = None, decimals: int = 2,
                formats: Sequence[str] = TABLE_FORMATS) -> list[Path]:
    """Write stem.md / .csv / .tex / .html (atomically); CSV keeps full precision for tools."""
    stem = Path(stem)
    written = []
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        if fmt == "csv":
            text = df.write_csv(float_precision=6)
        elif fmt == "md":
            text = to_markdown(df, decimals, title, note)
        elif fmt == "tex":
            text = to_latex(df, decimals, caption=title + (f". {note}" if note else ""), label=f"tab:{stem.name}")
        elif fmt == "html":
            text = to_html(df, decimals, title, note)
        else:
            raise AnalysisError(f"unknown table format {fmt!r}; known: {', '.join(TABLE_FORMATS)}")
        _write_text_atomic(text, path)
        written.append(path)
    return written


# ---- regression over cells -------------------------------------------------------------------------


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
                      strategies: Sequence[str] = REGRESSION_STRATEGIES) -> dict[str, Any]:
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


# ---- everything the tables rule writes ---------------------------------------------------------

TABLES = {
    "accuracy_gain": "Accuracy gain over the base model (Table 1)",
    "learnable": "Learnable % of training steps (Table 2)",
    "ood_pass_at_k": "Out-of-distribution pass@k (Table 4)",
    "base_split": "Base-wrong vs base-right vs size-matched random vs full pool",
    "tier_accuracy": "Accuracy per difficulty tier, base model and final checkpoint",
    "pool_pass_rates": "Pass-rate distribution of the training pool",
    "subset_pass_rates": "Pass rates of each selected subset",
    "catch_up": "Final accuracy against the full-pool run's, and the share of its steps (paper 2's catch-up)",
    "data_overlap": "Pool against benchmarks: questions in both",
}


def load_overlaps(files: Iterable[str | Path]) -> pl.DataFrame:
    """The data check of every task (results/overlap/{task}.json): one row per task x benchmark."""
    import json

    rows = []
    for f in files:
        report = json.loads(Path(f).read_text())
        for bench, o in report["benchmarks"].items():
            rows.append({"task": report["task"], "pool": report["pool"], "benchmark": bench, "n_pool": o["n_pool"],
                         "n_benchmark": o["n_benchmark"], "exact": o["exact"], "normalized": o["normalized"],
                         "allowed": report["allowed"]})
    return pl.DataFrame(rows, schema={"task": pl.Utf8, "pool": pl.Utf8, "benchmark": pl.Utf8, "n_pool": pl.Int64,
                                      "n_benchmark": pl.Int64, "exact": pl.Int64, "normalized": pl.Int64,
                                      "allowed": pl.Int64})


def build_tables(res: Results, probes: pl.DataFrame, subsets: pl.DataFrame, level: float = 0.95,
                 n_boot: int = 2000, seed: int = 0, ref: pl.DataFrame | None = None,
                 names: dict | None = None, generations: dict[str, int] | None = None,
                 overlaps: pl.DataFrame | None = None) -> dict[str, tuple[pl.DataFrame, str]]:
    """Every table of the report as {name: (frame, note)}; published columns added when `ref` is given;
    the learnable % expected from the probe beside the measured one when `generations` (model -> G) is."""
    from hardex.limits import catch_up_table  # imported here: limits builds on this module's statistics

    summary = run_summary(res)
    pct = f"{round(100 * level)} %"
    gains = gain_table(res, level, n_boot, seed, summary)
    learn = learnable_table(summary, level)
    ood = ood_table(res)
    split = base_split_table(gains, subsets)
    tiers = tier_table(res)
    pool = pool_distribution(probes)
    subs = subset_pass_rates(probes, subsets, generations)
    catch = catch_up_table(res.runs, level).with_row_index("_row")  # strategies in paper order, rows kept
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
        "subset_pass_rates": (subs, "Size and pass rates of the pool and of each selected subset." + expected_note),
        "catch_up": (catch, "Each strategy against the run on the full pool (strategy full), at the end of both, on "
                            "each benchmark, overall and per tier. steps: the run's last checkpoint; share_pct = 100 x "
                            "steps / the full run's steps. accuracy, full_accuracy: final accuracy in % (mean over "
                            f"seeds); difference: strategy minus full in points, with its {pct} t-interval across "
                            "seeds (paired by seed number when both ran the same seeds, Welch's otherwise; none with "
                            "one seed); matches: the interval's upper end >= 0, i.e. not shown worse than the full run "
                            "(empty without an interval). Paper 2: the lower tiers alone match the full run with "
                            "~45 % of its steps." + no_verdict if catch.height else
                     "No run on the full pool (strategy full) in this configuration: nothing to catch up with."),
        "data_overlap": (overlaps if overlaps is not None else load_overlaps([]),
                         "Questions of each benchmark that are also in the task's pool: exact, and only after "
                         "normalizing case, spacing and punctuation. A task with more than tasks.<task>.allow_overlap "
                         "(allowed) of them stops before probing: its gain would be measured on training data."),
    }
