"""The learnable-% regression (`regression.json`): gain on learnable % over the cells of the budget strategies,
seeds averaged, the bootstrap resampling cells; beside it the same fit on the published runs.

Conventions: see `hardex.report`.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import polars as pl

from hardex.report.runs import CELL_KEYS, in_paper_order
from hardex.statistics import regression
from hardex.selection import BUDGET_STRATEGIES, strategy_sort_key


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
