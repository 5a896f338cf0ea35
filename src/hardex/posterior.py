"""Each example's pass rate as a Beta posterior given its k of K probe samples, with a prior fitted to the
pool's own counts, and what that posterior expects of a GRPO group of G samples.

Why a posterior: the raw rate k/K says that an example never solved in K = 8 samples has pass rate 0,
so its groups never mix and GRPO learns nothing from it. But an example whose true pass rate is 0.1
shows 0 of 8 about 43 % of the time, while a group of 8 at that rate mixes about 57 % of the time. What
a count of 0 of 8 is worth depends on the pool: among examples the model mostly fails but sometimes
solves, a 0 of 8 is often a 0.05 or a 0.1; in a pool where the model never solves anything it is a 0.

The prior: **empirical Bayes**, a Beta(a, b) fitted to the pool's own counts by maximum likelihood of
the beta-binomial (`fit_prior`), so the pool says how much its zeros are worth. Jeffreys' Beta(1/2, 1/2)
is the fallback where the pool is too small to fit a prior (fewer than `MIN_FIT_EXAMPLES` examples): it
is uninformative and invariant, but blind to the pool, so a 0 of 4 always keeps a fair chance of mixing.
An example with c of k right then has the posterior Beta(a + c, b + k - c) (`posterior_params`).

The expected share of mixed groups at group size G (`expected_mixed_posterior`) is E[1 - p^G - (1 - p)^G]
under that posterior, in closed form: E[p^G] = B(a + G, b) / B(a, b) and E[(1 - p)^G] = B(a, b + G) / B(a, b).

Only math and numpy (probing and training environments have no scipy); the tests check it against
scipy and Monte Carlo.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable

import numpy as np
import polars as pl

#: a pool smaller than this gets Jeffreys' prior: a beta-binomial fit on a handful of counts is noise
MIN_FIT_EXAMPLES = 20
#: Jeffreys' prior, the fallback
JEFFREYS = (0.5, 0.5)
#: bounds of the fitted prior's mean and concentration a + b (an all-zero pool drives the fit to the edge)
_MEAN_RANGE = (1e-4, 1 - 1e-4)
_CONCENTRATION_RANGE = (0.05, 1e4)

#: the probe table's posterior columns, beside k, n_correct and pass_rate
POSTERIOR_COLUMNS = ("posterior_a", "posterior_b", "posterior_mean")


def log_beta(a: float, b: float) -> float:
    """log B(a, b)."""
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def expected_mixed_posterior(a: float, b: float, g: int) -> float:
    """E[1 - p^g - (1 - p)^g] for p ~ Beta(a, b): the chance that a group of g samples at a pass rate drawn
    from the posterior mixes right and wrong answers (has a GRPO gradient). Closed form: E[p^g] =
    B(a + g, b) / B(a, b), E[(1 - p)^g] = B(a, b + g) / B(a, b)."""
    base = log_beta(a, b)
    return 1.0 - math.exp(log_beta(a + g, b) - base) - math.exp(log_beta(a, b + g) - base)


def _log_likelihood(a: float, b: float, counts: Counter) -> float:
    """Beta-binomial log likelihood of (k, c) counts, without the binomial coefficients (constant in a, b)."""
    base = log_beta(a, b)
    return sum(n * (log_beta(a + c, b + k - c) - base) for (k, c), n in counts.items())


def _golden_max(f, lo: float, hi: float, iters: int = 60) -> float:
    """The maximiser of a unimodal f on [lo, hi]."""
    ratio = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(iters):
        if f1 < f2:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + ratio * (hi - lo)
            f2 = f(x2)
        else:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - ratio * (hi - lo)
            f1 = f(x1)
    return (lo + hi) / 2


def fit_prior(k: Iterable[int], n_correct: Iterable[int]) -> tuple[float, float, str]:
    """(a, b, method): the pool's pass-rate prior. `empirical_bayes`: the Beta(a, b) that maximises the
    beta-binomial likelihood of the pool's counts (each example's own k: adaptive probing gives them
    different ones), over its mean (logit) and concentration a + b (log), each by golden section (the
    concentration on the profile likelihood). `jeffreys`: Beta(1/2, 1/2), for a pool of fewer than
    `MIN_FIT_EXAMPLES` examples with samples."""
    counts = Counter((int(kk), int(c)) for kk, c in zip(k, n_correct) if int(kk) > 0)
    if sum(counts.values()) < MIN_FIT_EXAMPLES:
        return (*JEFFREYS, "jeffreys")
    logit = [math.log(m / (1 - m)) for m in _MEAN_RANGE]
    logs = [math.log(s) for s in _CONCENTRATION_RANGE]

    def params(t: float, u: float) -> tuple[float, float]:
        m, s = 1 / (1 + math.exp(-t)), math.exp(u)
        return m * s, (1 - m) * s

    def best_mean(u: float) -> float:
        return _golden_max(lambda t: _log_likelihood(*params(t, u), counts), *logit)

    u = _golden_max(lambda u: _log_likelihood(*params(best_mean(u), u), counts), *logs)
    a, b = params(best_mean(u), u)
    return a, b, "empirical_bayes"


def posterior_params(k: Iterable[int], n_correct: Iterable[int], prior: tuple[float, float]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(a + c, b + k - c) per example: the Beta posterior of its pass rate under the prior (a, b)."""
    k, c = np.asarray(list(k), dtype=float), np.asarray(list(n_correct), dtype=float)
    return prior[0] + c, prior[1] + k - c


def with_posterior(probe: pl.DataFrame) -> tuple[pl.DataFrame, dict]:
    """(the probe table with `posterior_a`, `posterior_b` and `posterior_mean` beside its raw pass rate,
    the prior as {method, a, b}). The prior is fitted to this table's counts, so call it on a whole pool's
    probe, never on a subset. Columns already there are replaced."""
    a, b, method = fit_prior(probe["k"], probe["n_correct"])
    pa, pb = posterior_params(probe["k"], probe["n_correct"], (a, b))
    out = probe.drop(POSTERIOR_COLUMNS, strict=False).with_columns(
        pl.Series("posterior_a", pa, dtype=pl.Float64), pl.Series("posterior_b", pb, dtype=pl.Float64),
        pl.Series("posterior_mean", pa / (pa + pb), dtype=pl.Float64))
    return out, {"method": method, "a": a, "b": b}


def mixed_share(frame: pl.DataFrame, g: int) -> float:
    """The mean over a table's rows (carrying `posterior_a`, `posterior_b`) of `expected_mixed_posterior` at
    g: the share of a run's GRPO groups expected to mix, if the run draws its rows evenly."""
    if frame.height == 0:
        return math.nan
    return float(np.mean([expected_mixed_posterior(a, b, g)
                          for a, b in zip(frame["posterior_a"], frame["posterior_b"])]))
