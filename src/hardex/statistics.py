"""Intervals, tests and fits: t-intervals over seeds, the percentile bootstrap, the p-values of a paired
difference (zero, and equivalence within a margin) and Holm's adjustment, OLS with bootstrap intervals
and its confidence band, the difference of two sets of seeds, and the paired t-test's power."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

# the verdict word of a pair whose (Holm-adjusted) p is below alpha: the pairwise table's, the headline's and
# the sequential design's
DIFFERS = "differs"


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


def bootstrap_means(values: Sequence[float], n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """Means of `n_boot` resamples of the values with replacement (empty without values)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return np.empty(0)
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    chunk = max(1, 2_000_000 // max(1, v.size))  # bounded memory for large test sets
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        means[start:stop] = v[rng.integers(0, v.size, size=(stop - start, v.size))].mean(axis=1)
    return means


def percentile_interval(means: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap means (NaN without any)."""
    if means.size == 0:
        return (math.nan, math.nan)
    alpha = (1 - level) / 2
    return (float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha)))


def bootstrap_mean_interval(values: Sequence[float], level: float = 0.95, n_boot: int = 2000,
                            seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of a mean (resampling the values with replacement).

    With per-example differences final - base this is the paired bootstrap over test examples.
    """
    return percentile_interval(bootstrap_means(values, n_boot, seed), level)


def t_test_p(values: Sequence[float], margin: float) -> tuple[float, float]:
    """(p, p_equivalence) for the mean of paired differences over seeds (at least 2): p of the two-sided
    t-test of a zero mean, and p of two one-sided t-tests (TOST) that the mean lies within (-margin,
    +margin), the larger of the two one-sided p's."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    mean, df = float(v.mean()), v.size - 1
    se = float(v.std(ddof=1)) / math.sqrt(v.size)
    if se == 0:  # every seed gave the same difference: nothing varies, the mean is what it is
        return (float(mean == 0), float(abs(mean) >= margin))
    p = 2 * float(stats.t.sf(abs(mean) / se, df))
    p_equivalence = max(float(stats.t.sf((mean + margin) / se, df)), float(stats.t.cdf((mean - margin) / se, df)))
    return (p, p_equivalence)


def bootstrap_p(means: np.ndarray, margin: float) -> tuple[float, float]:
    """(p, p_equivalence) as `t_test_p`, read from bootstrap means: twice the smaller share of means on
    either side of zero (at most 1), and the larger share of means beyond -margin or beyond +margin."""
    if means.size == 0:
        return (math.nan, math.nan)
    p = min(1.0, 2 * min(float((means <= 0).mean()), float((means >= 0).mean())))
    return (p, max(float((means <= -margin).mean()), float((means >= margin).mean())))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (NaN entries are not tested: kept NaN and not
    counted): the i-th smallest of m is multiplied by m - i + 1, capped at 1, and made non-decreasing. An
    adjusted p below alpha rejects with a family-wise error rate of at most alpha."""
    p = np.asarray(pvalues, dtype=float)
    tested = np.flatnonzero(np.isfinite(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    out = np.full(p.size, math.nan)
    running = 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (order.size - i) * p[j]))
        out[j] = running
    return out.tolist()


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


def seeds_and_questions_interval(diffs: np.ndarray, level: float = 0.95, n_boot: int = 2000,
                                 seed: int = 0) -> tuple[float, float]:
    """Interval for a gain that varies with the seed and with the test questions drawn, from `diffs`
    (seeds x questions: final minus base of the same seed on each question; NaN where a seed lacks one).

    A two-stage bootstrap: each resample draws the seeds with replacement, then the questions with
    replacement, the same questions for every seed of the draw (all seeds answer one test set), and
    takes the mean. Its standard deviation, times sqrt(k / (k - 1)) (a bootstrap over k seeds sees
    only (k - 1) / k of their variance), is the standard error; the interval is the mean +- Student's t
    with k - 1 degrees of freedom times it, since a percentile interval over 3 or 5 seeds is far too
    narrow. Without question effects it is the t over seeds; where questions differ in how much
    training helps them, it is wider. It errs wide: the noise of one seed on one question enters both
    stages (Owen 2007, the pigeonhole bootstrap), and the question part has more than k - 1 degrees of
    freedom. NaN bounds with one seed (nothing shows how seeds vary).
    """
    d = np.asarray(diffs, dtype=float)
    k, n = d.shape
    if k < 2 or n == 0:
        return (math.nan, math.nan)
    have = np.isfinite(d)
    values, counts = np.where(have, d, 0.0), have.astype(float)
    mean = float(values.sum() / counts.sum())
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    chunk = max(1, 2_000_000 // max(1, n))  # bounded memory for large test sets
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        seeds_w = rng.multinomial(k, np.full(k, 1.0 / k), size=stop - start)  # times each seed is drawn
        questions_w = rng.multinomial(n, np.full(n, 1.0 / n), size=stop - start)
        total = np.einsum("bs,sb->b", seeds_w, values @ questions_w.T)
        number = np.einsum("bs,sb->b", seeds_w, counts @ questions_w.T)
        means[start:stop] = total / np.where(number > 0, number, np.nan)
    se = float(np.nanstd(means)) * math.sqrt(k / (k - 1))
    half = t_ppf(0.5 + level / 2, k - 1) * se
    return (mean - half, mean + half)


def paired_t_power(effect_size: float, n: int, alpha: float = 0.05) -> float:
    """Power of a two-sided paired t-test with n pairs at level alpha, for a true mean difference of
    `effect_size` standard deviations of the differences.

    Exact, as one integral: the test rejects when |Z + nc| > crit * S, with Z standard normal, nc =
    effect_size * sqrt(n) and S = sqrt(chi2(n - 1) / (n - 1)) independent of it, so the power is the
    normal tail beyond crit * s - nc, and below -crit * s - nc, averaged over S's density. scipy's
    noncentral t (`stats.nct`) gives the same numbers but returns NaN far in its tail (d = 6.2 at 2 pairs,
    whose power is 0.51: the search then took NaN for enough); the normal tails here never do.
    """
    from scipy import integrate, stats

    df = n - 1
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    nc = abs(effect_size) * math.sqrt(n)
    if math.isinf(nc):
        return 1.0
    scale = math.sqrt(df)  # S = chi(df) / sqrt(df)

    def rejected(s: float) -> float:
        return float(stats.norm.sf(crit * s - nc) + stats.norm.cdf(-crit * s - nc)) * scale * float(
            stats.chi.pdf(s * scale, df))

    low, high = (float(q) / scale for q in stats.chi.ppf([1e-15, 1 - 1e-15], df))
    return integrate.quad(rejected, low, high, limit=200, epsabs=1e-12, epsrel=1e-10)[0]


def seeds_needed(mean: float, sd: float, power: float = 0.8, alpha: float = 0.05,
                 max_seeds: int = 1000) -> int | None:
    """The fewest seeds (pairs, at least 2) at which a paired t-test at two-sided level alpha tells a
    mean difference `mean` with seed-to-seed standard deviation `sd` from zero with probability
    `power`; None beyond `max_seeds` (or with no difference at all). Effect size d = mean / sd; the
    textbook values: d = 1 needs 10, d = 0.5 needs 34 (80 %, 5 %). The answer's power is at least
    `power` and the power one seed fewer is below it; a power that is not a number never counts as
    enough."""
    if not (math.isfinite(mean) and math.isfinite(sd)) or mean == 0:
        return None
    if sd == 0:
        return 2  # every seed gave the same difference
    d = abs(mean) / sd
    from scipy import stats

    def enough(n: int) -> bool:
        return paired_t_power(d, n, alpha) >= power  # False for NaN

    # the known-variance z-test's n is a lower bound near the answer: step from it to the exact one
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    n = min(max(2, int((z / d) ** 2) - 2), max_seeds)
    while n > 2 and enough(n - 1):
        n -= 1
    while not enough(n):
        if n >= max_seeds:
            return None
        n += 1
    return n
