"""Sharpening against new solving: the base model's pass@k at large k beside each strategy's final
checkpoint, and a sharpening null tested against its own prediction (the `pass_at_k` table and figure).

RLVR mostly raises pass@1 within what the base model already solves at large k (Yue et al. 2025,
arXiv 2504.13837). `beyond_base_pct` counts the test questions the final checkpoint solves at least once
in its n samples that the base never solved in its K (`evaluation.base_pass_k`). That count is not near 0
under sharpening alone: a question with a small nonzero pass rate often shows 0 of K, and a policy that
only sharpens (p -> f(p), f(0) = 0) then solves it. So the table compares it with what sharpening predicts.

The base model's samples of a question are pooled over every seed's base evaluation (the questions are the
same, only the sampling noise differs): K is all of them (16 seeds of 8 samples: 128), so "never solved by
the base" means never in K, and the null is fitted to the pooled counts. With a seed's own 8 samples, many
questions of small pass rate show 0 of 8, the null predicts them "beyond the base", and it cannot separate
what 128 samples would.

The sharpening null, per model x task x strategy x seed:
- the base model's per-question pass rate p ~ Beta(a, b), fitted to the pooled base counts (n, n_correct)
  by beta-binomial maximum likelihood (`hardex.posterior.fit_prior`);
- the trained model's pass rate is p^gamma, with gamma > 0 chosen so that the null's pass@1, E[p^gamma] =
  B(a + gamma, b) / B(a, b), equals the final checkpoint's observed pass@1 (`fit_gamma`);
- it then predicts the final checkpoint's pass@k, E[1 - (1 - p^gamma)^k] (`null_pass_at_k`), and the share
  of questions beyond the base, E[(1 - p)^K (1 - (1 - p^gamma)^n)] with that seed's K and n
  (`null_beyond`), both by numeric integration over the Beta (`beta_expect`); K the pooled base samples.
`beyond_sharpening` is observed minus predicted: a t-interval over the per-seed differences with several
seeds, a percentile bootstrap over test questions (Beta and gamma refitted on each resample) with one.
On counts simulated from a Beta and sharpened exactly the interval covers 0; the test errs toward the null:
questions the base can never solve (p = 0 exactly) pull the fitted a down, and the null then sharpens the
many tiny pass rates it believes in, so it absorbs part of real new solving (tests/unit/test_sharpening.py).

Greedy accuracy (`evaluation.greedy`) sits beside sampled pass@1: a policy that is only sharpened moves
its sampled accuracy toward its greedy one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import polars as pl

from hardex.metrics import pass_at_k
from hardex.posterior import MIN_FIT_EXAMPLES, fit_prior, log_beta
from hardex.report.loading import Results
from hardex.selection import strategy_sort_key
from hardex.statistics import t_interval

#: bootstrap resamples of the one-seed interval: each refits the Beta (tens of ms), so fewer than the
#: report's bootstrap; a few hundred place a 95 % interval's ends well enough for a verdict
NULL_BOOTSTRAP = 400


def k_values(n: int) -> list[int]:
    """1, 2, 4, ... up to n samples, and n itself when it is not a power of two."""
    ks = [2**i for i in range(n.bit_length()) if 2**i <= n]
    return ks + ([n] if ks[-1] != n else [])


# ---- the sharpening null --------------------------------------------------------------------------------


def beta_expect(f: Callable[[float], float], a: float, b: float) -> float:
    """E[f(p)] for p ~ Beta(a, b) and f bounded on [0, 1], as the integral of f(F^-1(u)) over u in (0, 1),
    F the Beta's cdf. In u the density is gone, so neither its singularities at 0 (a < 1) and 1 (b < 1) nor
    a narrow peak (large a + b) can mislead quad; what is left near the ends is bounded."""
    from scipy import integrate, special  # scipy is slow to import, and only the report needs it here

    value, _ = integrate.quad(lambda u: f(float(special.betaincinv(a, b, u))), 0.0, 1.0, limit=200)
    return value


def fit_gamma(a: float, b: float, pass1: float) -> float:
    """The gamma > 0 with E[p^gamma] = pass1 for p ~ Beta(a, b): E[p^gamma] = B(a + gamma, b) / B(a, b)
    falls from 1 to 0 as gamma grows, so one root (in log gamma, by brentq). 0 where pass1 is too near 1
    to tell from it, inf where pass1 is 0 (a model that never answers right)."""
    from scipy import optimize

    if pass1 <= 0:
        return math.inf
    base = log_beta(a, b)

    def excess(x: float) -> float:
        return log_beta(a + math.exp(x), b) - base - math.log(pass1)

    lo, hi = -30.0, 30.0
    if excess(lo) <= 0:
        return 0.0
    if excess(hi) >= 0:
        return math.inf
    return math.exp(optimize.brentq(excess, lo, hi, xtol=1e-12))


def null_pass_at_k(a: float, b: float, gamma: float, k: int) -> float:
    """pass@k of a model whose pass rate is p^gamma, p ~ Beta(a, b): E[1 - (1 - p^gamma)^k]."""
    return beta_expect(lambda p: 1.0 - (1.0 - p**gamma) ** k, a, b)


def null_beyond(a: float, b: float, gamma: float, base_k: int, n: int) -> float:
    """The chance that a question is beyond the base under the null: the base (pass rate p ~ Beta(a, b))
    fails all its base_k samples and the sharpened model (p^gamma) solves one of its n,
    E[(1 - p)^base_k (1 - (1 - p^gamma)^n)]."""
    return beta_expect(lambda p: (1.0 - p) ** base_k * (1.0 - (1.0 - p**gamma) ** n), a, b)


@dataclass(frozen=True)
class NullFit:
    """One seed's sharpening null on paired questions; shares are fractions."""
    a: float
    b: float
    gamma: float
    observed: float  # share of questions beyond the base
    predicted: float  # the null's share

    @property
    def difference(self) -> float:
        return self.observed - self.predicted


def sharpening_null(base_n: np.ndarray, base_c: np.ndarray, n: np.ndarray, c: np.ndarray) -> NullFit | None:
    """The null on one seed's questions, paired by position: the base's samples and correct ones
    (base_n, base_c) and the final checkpoint's (n, c). None with fewer than `MIN_FIT_EXAMPLES` questions,
    where `fit_prior` would fall back to Jeffreys' prior instead of fitting the base, or with a question of
    one base sample: counts of 0 or 1 of 1 fix the Beta's mean but not its spread, on which the null rests."""
    if len(base_n) < MIN_FIT_EXAMPLES or base_n.min() < 2:
        return None
    a, b, _ = fit_prior(base_n, base_c)
    gamma = fit_gamma(a, b, float(np.mean(c / n)))
    # each question with its own K and n (nearly always one pair for all)
    pairs, counts = np.unique(np.stack([base_n, n], axis=1), axis=0, return_counts=True)
    predicted = sum(m * null_beyond(a, b, gamma, int(bk), int(nk)) for (bk, nk), m in zip(pairs, counts))
    observed = float(np.mean((base_c == 0) & (c > 0)))
    return NullFit(a, b, gamma, observed, float(predicted) / len(base_n))


def bootstrap_difference(base_n: np.ndarray, base_c: np.ndarray, n: np.ndarray, c: np.ndarray,
                         level: float = 0.95, n_boot: int = NULL_BOOTSTRAP, seed: int = 0) -> tuple[float, float]:
    """Percentile interval of observed minus predicted beyond-base share (fractions) over test questions
    resampled with replacement, the Beta and gamma refitted on each resample: the question sample's
    uncertainty in both. The checkpoint is held fixed (one training seed says nothing of another)."""
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n_boot):
        i = rng.integers(0, len(base_n), len(base_n))
        fit = sharpening_null(base_n[i], base_c[i], n[i], c[i])
        if fit is not None:
            diffs.append(fit.difference)
    if not diffs:
        return (math.nan, math.nan)
    alpha = (1 - level) / 2
    return (float(np.quantile(diffs, alpha)), float(np.quantile(diffs, 1 - alpha)))


def null_verdict(low: float | None, high: float | None, n_seeds: int) -> str | None:
    """The finding in words: beyond sharpening where the interval lies above zero, below it where it lies
    below, not separated otherwise; with one seed the interval is over questions only, and says so."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return None
    word = ("beyond sharpening" if low > 0 else "below sharpening" if high < 0
            else "not separated from sharpening")
    return word + (" (one seed)" if n_seeds == 1 else "")


# ---- the table ------------------------------------------------------------------------------------------


def _pass_row(outcomes: pl.DataFrame, ks: list[int]) -> dict[str, float | None]:
    """pass@k in % (unbiased, mean over examples) for each k the outcomes' samples allow, else None."""
    n_min = int(outcomes["n"].min())
    out: dict[str, float | None] = {}
    for k in ks:
        vals = [pass_at_k(n, c, k) for n, c in zip(outcomes["n"], outcomes["n_correct"])] if k <= n_min else []
        out[f"pass@{k}"] = 100 * sum(vals) / len(vals) if vals else None
    return out


def _greedy(outcomes: pl.DataFrame) -> float | None:
    if "greedy_correct" not in outcomes.columns or outcomes["greedy_correct"].null_count() == outcomes.height:
        return None
    return 100 * float(outcomes["greedy_correct"].drop_nulls().mean())


def _mean(values: list) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else None


def _arrays(frame: pl.DataFrame, *cols: str) -> list[np.ndarray]:
    return [frame[c].to_numpy().astype(float) for c in cols]


def _null_columns(fits: list[NullFit], paired: list[pl.DataFrame], ks: list[int], n_min: int, level: float,
                  n_boot: int, seed: int) -> dict:
    """The null's columns of one strategy's row, from its seeds' fits and paired questions."""
    cols: dict = {f"null_pass@{k}": (_mean([100 * null_pass_at_k(f.a, f.b, f.gamma, k) for f in fits])
                                     if k <= n_min else None) for k in ks}
    if not fits:
        return cols
    cols |= {"predicted_beyond_base_pct": _mean([100 * f.predicted for f in fits]),
             "beyond_sharpening": _mean([100 * f.difference for f in fits]),
             "gamma": _mean([f.gamma for f in fits]), "base_a": _mean([f.a for f in fits]),
             "base_b": _mean([f.b for f in fits])}
    if len(fits) >= 2:
        low, high = t_interval([100 * f.difference for f in fits], level)
        cols["interval"] = f"t over {len(fits)} seeds"
    else:
        j = paired[0]
        low, high = (100 * v for v in bootstrap_difference(*_arrays(j, "bn", "bc", "fn", "fc"), level, n_boot, seed))
        cols["interval"] = f"bootstrap over {j.height} questions (one seed)"
    cols |= {"beyond_sharpening_ci_low": low, "beyond_sharpening_ci_high": high,
             "verdict": null_verdict(low, high, len(fits))}
    return cols


def pooled_base(base: pl.DataFrame) -> pl.DataFrame:
    """One row per question (id): the samples and right ones of every seed's base evaluation summed (n,
    n_correct)."""
    return base.group_by("id", maintain_order=True).agg(pl.col("n").sum(), pl.col("n_correct").sum())


def pass_at_k_table(res: Results, level: float = 0.95, n_boot: int = NULL_BOOTSTRAP, seed: int = 0) -> pl.DataFrame:
    """Per model x task, on the task's first benchmark: the base model's row (strategy "base") and each
    strategy's final checkpoint: n_samples per question, greedy accuracy (%, where stored), pass@k (%) for k = 1, 2, 4,
    ... up to the base's samples (a strategy's columns beyond its own samples are empty), and beyond_base_pct: the % of
    questions the final checkpoint solves in at least one of its samples that the base never solved in any of its
    samples, pooled over every seed's base evaluation (base_samples of them). Beside it the sharpening null (see the
    module docstring): its predicted beyond_base_pct, beyond_sharpening (observed minus predicted) with its `level`
    interval (t over seeds; with one seed a bootstrap over questions, `n_boot` resamples from `seed`) and verdict, the
    fitted gamma and base Beta(a, b), and null_pass@k, its predicted pass@k (on the base row: the fitted Beta's own, a
    check of the fit). Means over seeds."""
    rows = []
    for (model, task), base_all in res.base.group_by(["model", "task"], maintain_order=True):
        bench = res.in_distribution(task)
        base_all = base_all.filter(pl.col("benchmark") == bench)
        if base_all.height == 0:
            continue
        base_seeds = [g for _, g in base_all.group_by("seed", maintain_order=True)]
        base = pooled_base(base_all)  # every seed's samples of each question (module docstring)
        ks = k_values(int(base["n"].min()))
        fits = [fit_prior(base["n"], base["n_correct"])] if base.height >= MIN_FIT_EXAMPLES and \
            base["n"].min() >= 2 else []  # as sharpening_null
        rows.append({"model": model, "task": task, "benchmark": bench, "strategy": "base",
                     "n_seeds": len(base_seeds), "step": 0, "n_samples": int(base["n"].min()),
                     "base_samples": int(base["n"].min()), "greedy": _mean([_greedy(g) for g in base_seeds]),
                     **_pass_row(base, ks), "beyond_base_pct": None,
                     "base_a": _mean([a for a, _, _ in fits]), "base_b": _mean([b for _, b, _ in fits]),
                     **{f"null_pass@{k}": _mean([100 * null_pass_at_k(a, b, 1.0, k) for a, b, _ in fits])
                        for k in ks}})
        runs = res.runs.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("benchmark") == bench))
        for (strategy,), grp in runs.group_by(["strategy"], maintain_order=True):
            finals, beyond, paired, null_fits = [], [], [], []
            for _, run in grp.group_by(["seed"], maintain_order=True):
                final = run.filter(pl.col("step") == run["step"].max())
                if int(final["step"][0]) == 0:
                    continue
                finals.append(final)
                # sorted by id: a bootstrap resamples positions, so the order must not depend on the join's
                j = final.select("id", pl.col("n").alias("fn"), pl.col("n_correct").alias("fc")).join(
                    base.select("id", pl.col("n").alias("bn"), pl.col("n_correct").alias("bc")),
                    on="id", how="inner").sort("id")
                beyond.append(100 * float(((j["bc"] == 0) & (j["fc"] > 0)).mean()) if j.height else None)
                fit = sharpening_null(*_arrays(j, "bn", "bc", "fn", "fc"))
                if fit is not None:
                    null_fits.append(fit)
                    paired.append(j)
            if not finals:
                continue
            per_seed = [_pass_row(f, ks) for f in finals]
            n_min = min(int(f["n"].min()) for f in finals)
            rows.append({"model": model, "task": task, "benchmark": bench, "strategy": strategy,
                         "n_seeds": len(finals), "step": max(int(f["step"][0]) for f in finals),
                         "n_samples": n_min, "base_samples": int(base["n"].min()),
                         "greedy": _mean([_greedy(f) for f in finals]),
                         **{c: _mean([r[c] for r in per_seed]) for c in per_seed[0]},
                         "beyond_base_pct": _mean(beyond),
                         **_null_columns(null_fits, paired, ks, n_min, level, n_boot, seed)})
    if not rows:
        return pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "benchmark": pl.Utf8, "strategy": pl.Utf8})
    df = pl.DataFrame(rows, infer_schema_length=None)
    ks = sorted({int(c.split("@")[1]) for c in df.columns if c.startswith("pass@")})
    floats = ["greedy", *[f"pass@{k}" for k in ks], "beyond_base_pct", *NULL_FLOATS,
              *[f"null_pass@{k}" for k in ks]]
    df = df.with_columns([pl.lit(None, dtype=pl.Float64).alias(c) for c in floats if c not in df.columns]
                         + [pl.lit(None, dtype=pl.Utf8).alias(c) for c in ("interval", "verdict")
                            if c not in df.columns])
    cols = ["model", "task", "benchmark", "strategy", "n_seeds", "step", "n_samples", "base_samples", "greedy",
            *[f"pass@{k}" for k in ks], "beyond_base_pct", "predicted_beyond_base_pct", "beyond_sharpening",
            "beyond_sharpening_ci_low", "beyond_sharpening_ci_high", "interval", "verdict", "gamma", "base_a",
            "base_b", *[f"null_pass@{k}" for k in ks]]
    df = df.select(cols).with_columns(pl.col(floats).cast(pl.Float64), pl.col("interval", "verdict").cast(pl.Utf8))
    ranked = sorted(df["strategy"].unique(), key=lambda st: (-1, "") if st == "base" else strategy_sort_key(st))
    return df.sort(["model", "task", pl.col("strategy").replace_strict({st: i for i, st in enumerate(ranked)},
                                                                       return_dtype=pl.Int64)])


#: the null's float columns besides null_pass@k
NULL_FLOATS = ("predicted_beyond_base_pct", "beyond_sharpening", "beyond_sharpening_ci_low",
               "beyond_sharpening_ci_high", "gamma", "base_a", "base_b")


def pass_at_k_note(level: float = 0.95, n_boot: int = NULL_BOOTSTRAP) -> str:
    """The pass_at_k table's note at the report's interval level."""
    pct = f"{round(100 * level)} %"
    return (
        "On each task's first benchmark: pass@k in % (unbiased estimator, mean over questions, then over seeds) of "
        "the base model, with k = 1, 2, 4, ... up to its samples per question (n_samples: evaluation.base_pass_k "
        "where set, times its seeds' evaluations: they are pooled, base_samples), and of each strategy's final "
        "checkpoint with its own samples (columns beyond them empty). "
        "greedy: accuracy in % of one greedy completion per question (evaluation.greedy; empty without it). "
        "beyond_base_pct: % of questions the final checkpoint solves at least once in its n_samples that the base "
        "never solved in any of its base_samples (every seed's base evaluation of the question pooled). "
        "Sharpening alone does not leave this near 0: a question with a "
        "small pass rate often shows 0 of the base's samples, and a sharpened policy then solves it. So beside it "
        "stands a sharpening null, per seed: the base's pass rate p ~ Beta(base_a, base_b), fitted to the base's "
        "pooled per-question counts (beta-binomial maximum likelihood), and the trained model's pass rate p^gamma, "
        "gamma chosen so that the null's pass@1, E[p^gamma], equals the checkpoint's observed pass@1. "
        "predicted_beyond_base_pct: the null's E[(1 - p)^K (1 - (1 - p^gamma)^n)] in %, K and n the base's and the "
        "checkpoint's samples; beyond_sharpening: observed minus predicted, in points, with its "
        f"{pct} interval (interval says which: t over the per-seed differences with several seeds; with one, a "
        f"percentile bootstrap over test questions, {n_boot} resamples, the Beta and gamma refitted on each, the "
        "checkpoint held fixed). verdict: beyond sharpening where the interval lies above 0 (the checkpoint solves "
        "questions a sharpened base would not), below sharpening where it lies below, not separated from "
        "sharpening otherwise. gamma, base_a, base_b: the null's fit (mean over seeds; gamma < 1 raises every "
        "nonzero pass rate, 0 stays 0). null_pass@k: the null's predicted pass@k in % (null_pass@1 is the "
        "observed pass@1 by construction; on the base row, the fitted Beta's own pass@k, a check of the fit "
        "against the observed). "
        f"The null needs {MIN_FIT_EXAMPLES} test questions and 2 base samples of each; less leaves its columns "
        "empty."
    )


PASS_AT_K_NOTE = pass_at_k_note()
