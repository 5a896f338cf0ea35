"""The estimators every stage and the report share, on plain numbers and frames.

- pass@k: the unbiased estimator from n samples of which c are right (probing's pass rate is pass@1);
- learnable %: the share of GRPO groups whose rewards differ, the only groups with a gradient;
- expected mixed share: the chance that a group of G samples mixes right and wrong answers, predicted
  from a probe before any training;
- accuracy per step and per difficulty tier, from the per-example outcome files of evaluation.
"""

from __future__ import annotations

import math
from typing import Sequence

import polars as pl


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def learnable_pct(steps: pl.DataFrame) -> float:
    """100 x mean over steps of the share of groups with nonzero reward std.

    With one prompt per step this is the paper's definition (share of steps whose group has
    mixed rewards); with several prompts per step it is the share of all groups.
    """
    if steps.height == 0:
        return float("nan")
    return 100.0 * float((1.0 - steps["frac_zero_std"]).mean())


def expected_mixed(n_correct: int, k: int, g: int) -> float:
    """Chance that a GRPO group of g samples of the probed model mixes right and wrong answers (so it
    has a gradient), from a probe with n_correct of k right: 1 - p^g - (1 - p)^g, estimated without
    bias from the k samples when k >= g (drawing g of them without replacement), else with p = c/k.
    Taken as the example's own, it is 0 for every example never solved in the probe; `hardex.posterior`
    gives the same chance from the pass rate's posterior under the pool's prior."""
    if k >= g:
        return 1.0 - (math.comb(n_correct, g) + math.comb(k - n_correct, g)) / math.comb(k, g)
    p = n_correct / k
    return 1.0 - p**g - (1.0 - p) ** g


def summarize(outcomes: pl.DataFrame, ks: list[int]) -> pl.DataFrame:
    """Per step: accuracy (mean correct share over samples) and unbiased pass@k for each k."""
    rows = []
    for (step,), grp in outcomes.group_by(["step"], maintain_order=True):
        row = {"step": step, "n_examples": grp.height,
               "accuracy": float((grp["n_correct"] / grp["n"]).mean())}
        for k in ks:
            vals = [pass_at_k(n, c, k) for n, c in zip(grp["n"], grp["n_correct"]) if n >= k]
            row[f"pass@{k}"] = sum(vals) / len(vals) if vals else None
        rows.append(row)
    return pl.DataFrame(rows).sort("step")


def sort_tiers(df: pl.DataFrame, before: Sequence[str] = (), after: Sequence[str] = ()) -> pl.DataFrame:
    """Rows sorted by `before`, then by tier, then by `after`. Tiers are text (MATH levels, step
    counts): numeric ones sort as numbers (2 before 10), any others after them, alphabetically."""
    as_number = pl.col("tier").cast(pl.Float64, strict=False)
    return df.sort([*before, as_number, "tier", *after], nulls_last=True)


def accuracy_by_tier(outcomes: pl.DataFrame) -> pl.DataFrame:
    """Accuracy per checkpoint step and difficulty tier (the second paper's stratified view)."""
    per_tier = (
        outcomes.filter(pl.col("tier").is_not_null())
        .with_columns((pl.col("n_correct") / pl.col("n")).alias("acc"))
        .group_by(["step", "tier"])
        .agg(pl.col("acc").mean().alias("accuracy"), pl.len().alias("n_examples"))
    )
    return sort_tiers(per_tier, before=["step"])
