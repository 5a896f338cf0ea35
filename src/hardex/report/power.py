"""The power table: how many seeds each comparison needs (a strategy against its control, the base model and
every other strategy), from the spread of the seeds run (docs/power.md).

Conventions: see `hardex.report`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import polars as pl

from hardex.report.runs import in_paper_order
from hardex.selection import RunName, strategy_sort_key
from hardex.statistics import seeds_needed

POWER_KINDS = ("control", "base", "pair")  # the power table's row order within a model x task


def pooled_sd(sds: Sequence[float], seeds: Sequence[int]) -> float:
    """The standard deviation pooled over comparisons, each weighted by its degrees of freedom (seeds - 1):
    sqrt(sum (n_i - 1) s_i^2 / sum (n_i - 1)) over those with at least 2 seeds; NaN without any."""
    pairs = [(n - 1, sd) for sd, n in zip(sds, seeds) if n > 1 and math.isfinite(sd)]
    df = sum(d for d, _ in pairs)
    return math.sqrt(sum(d * sd**2 for d, sd in pairs) / df) if df else math.nan


def _controls(strategy: str, run: str) -> bool:
    """Whether `run` is a control or the online run of `strategy` (by RunName, not by prefix: tier_low_random is
    tier_low's random draw, another strategy)."""
    parsed = RunName.parse(run)
    return (parsed.control is not None or parsed.online) and parsed.strategy == strategy


def power_table(summary: pl.DataFrame, power: float = 0.8, alpha: float = 0.05, max_seeds: int = 1000) -> pl.DataFrame:
    """How many seeds a comparison needs: per model x task, every pair of strategies (final in-distribution
    accuracy, paired by seed) and every strategy against the base model (its gain, against zero).

    kind: "control" for a strategy against its control or its online run (`RunName`), listed first; "base" for the gain;
    "pair" for the rest. difference: mean over the seeds both ran of strategy minus versus (points); difference_sd: its
    standard deviation over those seeds. The spread the power analysis uses is `pooled_sd`, pooled over the model x
    task's comparisons of the same sort (two runs against each other, kinds control and pair; or a gain, kind base),
    each weighted by its degrees of freedom (`pooled_sd`): a standard deviation from 3 or 4 seeds is too rough to plan
    on alone, and a comparison whose seeds happened to agree would otherwise read as settled in 2 seeds. effect_size =
    difference / pooled_sd; seeds_needed: the fewest seeds at which a paired t-test at two-sided level `alpha` tells
    that difference from zero with probability `power` (`statistics.seeds_needed`), ">max_seeds" beyond it (not
    resolvable at this design, which does not make the two the same), "not estimable" with one seed.
    """
    rows = []
    for (model, task), cell in summary.group_by(["model", "task"], maintain_order=True):
        by_strategy = {s: dict(zip(g["seed"], g["final_accuracy"]))
                       for (s,), g in cell.group_by(["strategy"], maintain_order=True)}
        gains = {s: dict(zip(g["seed"], g["gain"])) for (s,), g in cell.group_by(["strategy"], maintain_order=True)}
        names = sorted(by_strategy, key=strategy_sort_key)
        comparisons = []
        for i, a in enumerate(names):
            comparisons.append((a, "base", "base", gains[a]))
            for b in names[i + 1:]:
                first, second = (b, a) if _controls(b, a) else (a, b)
                kind = "control" if _controls(first, second) else "pair"
                mine, other = by_strategy[first], by_strategy[second]
                comparisons.append((first, second, kind, {s: mine[s] - other[s] for s in mine if s in other}))
        own = []
        for strategy, versus, kind, diffs in comparisons:
            v = np.array(list(diffs.values()), dtype=float)
            own.append({"model": model, "task": task, "kind": kind, "strategy": strategy, "versus": versus,
                        "n_seeds": int(v.size), "difference": float(v.mean()) if v.size else math.nan,
                        "difference_sd": float(v.std(ddof=1)) if v.size > 1 else math.nan})
        pooled = {sort: pooled_sd([r["difference_sd"] for r in own if (r["kind"] == "base") == sort],
                                  [r["n_seeds"] for r in own if (r["kind"] == "base") == sort])
                  for sort in (False, True)}
        for r in own:
            sd = pooled[r["kind"] == "base"]
            if r["n_seeds"] < 2:
                needed = "not estimable"
            else:
                n = seeds_needed(r["difference"], sd, power, alpha, max_seeds)
                needed = str(n) if n is not None else f">{max_seeds}"
            rows.append(r | {"pooled_sd": sd if r["n_seeds"] > 1 else math.nan,
                             "effect_size": r["difference"] / sd if r["n_seeds"] > 1 and sd > 0 else math.nan,
                             "seeds_needed": needed})
    schema = {"model": pl.Utf8, "task": pl.Utf8, "kind": pl.Utf8, "strategy": pl.Utf8, "versus": pl.Utf8,
              "n_seeds": pl.Int64, "difference": pl.Float64, "difference_sd": pl.Float64, "pooled_sd": pl.Float64,
              "effect_size": pl.Float64, "seeds_needed": pl.Utf8}
    df = pl.DataFrame(rows, schema=schema)
    if df.height == 0:
        return df
    kinds = {k: i for i, k in enumerate(POWER_KINDS)}
    versus_order = {s: -1 if s == "base" else strategy_sort_key(s)[0] for s in df["versus"].unique()}
    df = df.with_columns(pl.col("kind").replace_strict(kinds, return_dtype=pl.Int64).alias("_kind"),
                         pl.col("versus").replace_strict(versus_order, return_dtype=pl.Int64).alias("_versus"))
    return in_paper_order(df, ["model", "task", "_kind", "strategy", "_versus", "versus"]).drop("_kind", "_versus")


def power_note(power: float, alpha: float, max_seeds: int) -> str:
    """The power table's note: how to read it before renting GPUs."""
    return (f"How many seeds tell a difference from zero: per model x task, each strategy against its control "
            f"(kind control: a run named <strategy>_<suffix>, its _online run included), against the base model "
            f"(kind base: its gain) and against every other strategy (kind pair). difference: final in-distribution "
            f"accuracy of strategy minus versus, in points, mean over the seeds both ran, paired by seed; "
            f"difference_sd: its standard deviation over those seeds. pooled_sd: the spread the power analysis "
            f"uses, the standard deviations of the model x task's comparisons pooled, each weighted by its degrees "
            f"of freedom (seeds - 1), separately for runs against runs (kinds control and pair) and for gains "
            f"(kind base): one comparison's spread from a few seeds is too rough to plan on. effect_size: "
            f"difference / pooled_sd. seeds_needed: the fewest seeds at which a paired t-test at two-sided level "
            f"{alpha:g} finds a true difference of that size with probability {power:g} (exact power; report.power); "
            f"not estimable with one seed. Read a row as: a difference of d points with seed spread s needs n seeds. "
            f"A large n, or >{max_seeds}, means the difference is not resolvable at this design, never that the "
            f"two are the same: the pairwise table's equivalence test says whether they are. d is an estimate "
            f"from the seeds run, and a small observed d makes a large n: treat n as an order of magnitude, and a "
            f"small n from few seeds as a reason to run a few more, not as a verdict. It is about this test set "
            f"(the seeds' spread includes evaluation noise; the questions stay fixed).")
