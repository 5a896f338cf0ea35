"""Intervals and fits: t-intervals over seeds, the percentile bootstrap, OLS with bootstrap intervals
and its confidence band, and the difference of two sets of seeds."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np


def t_ppf(p: float, df: float) -> float:
    """Quantile of Student's t."""
    # imported here: scipy.stats takes a second to import, and every Snakemake invocation imports the
    # report's table names (rules/common.smk) without computing an interval
    from scipy import stats

    if not 0 < p < 1:
        raise ValueError(f"quantile level {p} outside (0, 1)")
    return float(stats.t.ppf(p, df))


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


def seed_difference(mine: dict[int, float], full: dict[int, float],
                    level: float = 0.95) -> tuple[float, float, float, str]:
    """(mean of mine - mean of full, interval low, high, how): seed -> value on each side.

    Paired t by seed number when both sides ran the same seeds, Welch's t when they differ (a seed
    missing on one side), NaN bounds when a side has a single seed.
    """
    a, b = np.array(list(mine.values()), dtype=float), np.array(list(full.values()), dtype=float)
    diff = float(a.mean() - b.mean())
    if sorted(mine) == sorted(full):
        if len(mine) < 2:
            return diff, math.nan, math.nan, "one seed: no interval"
        lo, hi = t_interval([mine[s] - full[s] for s in mine], level)
        return diff, lo, hi, f"paired t over {len(mine)} seeds"
    if a.size < 2 or b.size < 2:
        return diff, math.nan, math.nan, f"{a.size} vs {b.size} seeds: no interval"
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    half = 0.0
    if va + vb > 0:
        df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
        half = t_ppf(0.5 + level / 2, df) * math.sqrt(va + vb)
    return diff, diff - half, diff + half, f"Welch t, {a.size} vs {b.size} seeds"
