"""The learnable-% regression (`regression.json`): gain on learnable % over the cells of the budget strategies,
seeds averaged, the bootstrap resampling cells; beside it the same gain on the learnable % the probe predicted
for each subset before any training, and the same fit on the published runs.

The share measured during training (`this_run`) is partly an outcome of the training it is regressed against (a
run that learns changes its groups' rewards); the probe's prediction (`before_training`) is fixed before the first
step, so only it can say that a subset's learnability, known in advance, goes with its gain. Both show association.

Conventions: see `hardex.report`.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import polars as pl

from hardex.report.runs import CELL_KEYS, in_paper_order
from hardex.selection import BUDGET_STRATEGIES, strategy_sort_key
from hardex.statistics import regression


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
    return in_paper_order(cells, CELL_KEYS)


def _cell_fit(cells: pl.DataFrame, strategies: Sequence[str], level: float, n_boot: int, seed: int) -> dict[str, Any]:
    fit = regression(cells["learnable_pct"].to_numpy(), cells["gain"].to_numpy(), level, n_boot, seed)
    seeds = cells["n_seeds"]
    return {**fit, "x": "learnable_pct", "y": "gain",
            "points_are": "one per model x task x strategy (cell), seeds averaged; the bootstrap resamples cells",
            "strategies": list(strategies), "n_cells": cells.height,
            "seeds_per_cell": {"min": seeds.min(), "max": seeds.max()} if cells.height else None,
            "points": cells.to_dicts()}


def predicted_cells(summary: pl.DataFrame, subset_table: pl.DataFrame, strategies: Sequence[str]) -> pl.DataFrame:
    """The regression's points with the probe's prediction for x: each cell's gain (seeds averaged) beside its
    subset's learnable % expected before training (`subset_table`'s `expected_learnable_pct_posterior`, the
    posterior's expected share of mixed groups at the run's G: `report.pool.subset_pass_rates`)."""
    gains = summary.filter(pl.col("gain").is_not_nan() & pl.col("strategy").is_in(list(strategies))).group_by(
        CELL_KEYS).agg(pl.len().cast(pl.Int64).alias("n_seeds"), pl.col("gain").mean())
    predicted = subset_table.select(*CELL_KEYS, pl.col("expected_learnable_pct_posterior").alias("learnable_pct"))
    cells = gains.join(predicted, on=CELL_KEYS, how="inner").filter(pl.col("learnable_pct").is_not_null())
    return in_paper_order(cells.select(*CELL_KEYS, "n_seeds", "learnable_pct", "gain"), CELL_KEYS)


def regression_report(summary: pl.DataFrame, level: float = 0.95, n_boot: int = 2000, seed: int = 0,
                      ref: pl.DataFrame | None = None, names: dict | None = None,
                      strategies: Sequence[str] = BUDGET_STRATEGIES,
                      subset_table: pl.DataFrame | None = None) -> dict[str, Any]:
    """Gain on learnable % over the cells of `strategies` (`regression_cells`: seeds averaged, the
    bootstrap resampling cells), with its points; with `subset_table` (`report.pool.subset_pass_rates` with
    group sizes), the same gains on the probe's prediction before training (`before_training`); and the same
    fit on every published run when a reference is given (one run per cell: the paper's 32 points)."""
    cells = regression_cells(summary, strategies)
    out: dict[str, Any] = {"this_run": _cell_fit(cells, strategies, level, n_boot, seed)}
    if subset_table is not None and "expected_learnable_pct_posterior" in subset_table.columns:
        fit = _cell_fit(predicted_cells(summary, subset_table, strategies), strategies, level, n_boot, seed)
        out["before_training"] = {**fit, "x": "expected_learnable_pct_posterior"}
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
