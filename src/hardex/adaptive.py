"""Adaptive probing (`probe.adaptive.enabled`, `probe_pool_adaptive`): sample the pool in rounds and stop
sampling an example once its place relative to every selection boundary is settled.

For the budget p, the hard boundary is the pass rate at the p-quantile from below (the m-th lowest,
m = floor(p N)) and the easy boundary the m-th highest, estimated after each round from every
example's data so far. An example whose confidence interval for its full-K pass rate lies above
a boundary is certainly outside that subset (hard) or inside it (easy), and below it the other
way round; once that holds for every boundary it gets no more samples. The rest are sampled up
to K. The samples an example does get are exactly samples 0..k-1 of full probing with the same
seed, so both tables are comparable example by example.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from statistics import NormalDist
from typing import Any, Callable

import numpy as np
import polars as pl

from hardex.generation.sampling import Sampling
from hardex.io import settings_hash, write_parquet_atomic
from hardex.probing import (
    SAMPLER_VERSION,
    SAMPLES_SCHEMA,
    chunk_tag,
    generate_counted,
    read_chunk,
    rows_tag,
    sample_rows,
)
from hardex.schema import schema_defaults
from hardex.selection import BOUNDARY_STRATEGIES, budget_size


def adaptive_config(settings: dict[str, Any]) -> dict[str, Any]:
    """The adaptive block with defaults filled in, checked."""
    cfg = {**schema_defaults("probe", "adaptive"), **(settings.get("adaptive") or {})}
    if cfg["strategies"] is None:  # the workflow fills in the selected ones; a direct caller gets these
        cfg["strategies"] = ["hard", "easy"]
    if cfg["method"] not in ("empirical_bayes", "wilson", "clopper_pearson"):
        raise ValueError(f"probe.adaptive.method {cfg['method']!r}: use empirical_bayes, wilson or clopper_pearson")
    if not 0 < float(cfg["confidence"]) < 1:
        raise ValueError("probe.adaptive.confidence must lie strictly between 0 and 1")
    bad = set(cfg["strategies"]) - set(BOUNDARY_STRATEGIES)
    if bad:
        raise ValueError(f"probe.adaptive.strategies: {sorted(bad)} have no pass-rate boundary; use hard, easy, medium")
    return cfg


def _budgets(budget) -> list[float]:
    if budget is None:
        raise ValueError("adaptive probing needs the selection budget (probe.adaptive.budget)")
    return [float(b) for b in (budget if isinstance(budget, (list, tuple)) else [budget])]


def _binom_cdf(x: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(0, x + 1))


def _bisect(f, lo: float = 0.0, hi: float = 1.0, iters: int = 60) -> float:
    """Root of an increasing f on [lo, hi]."""
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


@lru_cache(maxsize=None)
def rate_interval(a: int, r: int, method: str, confidence: float) -> tuple[float, float]:
    """Two-sided confidence interval for a pass rate from a successes in r samples."""
    alpha = 1 - confidence
    if r == 0:
        return 0.0, 1.0
    if method == "wilson":
        z = NormalDist().inv_cdf(1 - alpha / 2)
        ph = a / r
        den = 1 + z * z / r
        centre = (ph + z * z / (2 * r)) / den
        half = z / den * math.sqrt(ph * (1 - ph) / r + z * z / (4 * r * r))
        return max(0.0, centre - half), min(1.0, centre + half)
    if method == "clopper_pearson":
        lo = 0.0 if a == 0 else _bisect(lambda p: (1 - _binom_cdf(a - 1, r, p)) - alpha / 2)
        hi = 1.0 if a == r else _bisect(lambda p: alpha / 2 - _binom_cdf(a, r, p))
        return lo, hi
    raise ValueError(f"no rate interval for method {method!r}")


@lru_cache(maxsize=None)
def final_rate_interval(a: int, r: int, k: int, method: str, confidence: float) -> tuple[float, float]:
    """Interval for the pass rate an example would have after all k samples, given a of r so far.

    Always within the certain range [a/k, (a + k - r)/k]. `wilson` / `clopper_pearson`: the
    interval [L, U] for the example's pass rate, projected on the k - r samples still to come:
    (a + (k - r) L) / k .. (a + (k - r) U) / k.
    """
    if r >= k:
        return a / k, a / k
    rest = k - r
    lo, hi = rate_interval(a, r, method, confidence)
    return (a + rest * lo) / k, (a + rest * hi) / k


def boundary_indices(n: int, budget: float, strategies) -> list[int]:
    """Positions in the ascending pass-rate order whose value is a subset boundary for `budget`.

    hard = the m lowest (boundary: index m-1), easy = the m highest (index n-m), medium = the
    window of m starting at (n-m)//2 (indices (n-m)//2 and (n-m)//2+m-1); m = floor(budget n),
    as in hardex.selection.
    """
    m = budget_size(n, budget)
    out = []
    for s in strategies:
        if s == "hard":
            out.append(m - 1)
        elif s == "easy":
            out.append(n - m)
        elif s == "medium":
            out += [(n - m) // 2, (n - m) // 2 + m - 1]
    return sorted(set(out))


def _binom_pmf_table(k: int, grid: np.ndarray) -> dict[int, np.ndarray]:
    """{n: array (len(grid), n + 1) of Binomial(n, p_g) probabilities} for n = 0..k."""
    out = {}
    for n in range(k + 1):
        x = np.arange(n + 1)
        coef = np.array([math.comb(n, int(v)) for v in x], dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            pmf = coef[None, :] * grid[:, None] ** x[None, :] * (1 - grid[:, None]) ** (n - x)[None, :]
        out[n] = np.nan_to_num(pmf)
    return out


GRID = np.linspace(0.0, 1.0, 101)


def pooled_prior(taken: np.ndarray, correct: np.ndarray, grid: np.ndarray = GRID, iters: int = 200) -> np.ndarray:
    """Pass-rate distribution of the pool on `grid` (nonparametric maximum likelihood by EM, with a
    light uniform smoothing): the prior every example's posterior starts from."""
    with np.errstate(divide="ignore", invalid="ignore"):
        loglik = correct[:, None] * np.log(grid[None, :]) + (taken - correct)[:, None] * np.log1p(-grid[None, :])
    loglik = np.nan_to_num(loglik, nan=0.0, neginf=-1e30)
    lik = np.exp(loglik - loglik.max(1, keepdims=True))
    w = np.full(len(grid), 1.0 / len(grid))
    for _ in range(iters):
        post = lik * w
        post /= post.sum(1, keepdims=True)
        w = 0.99 * post.mean(0) + 0.01 / len(grid)
    return w


def final_count_pmf(taken: np.ndarray, correct: np.ndarray, k: int, prior: np.ndarray,
                    grid: np.ndarray = GRID) -> np.ndarray:
    """P(full-K correct count = c | data so far), shape (n, k + 1), under the pooled prior."""
    n = len(taken)
    with np.errstate(divide="ignore", invalid="ignore"):
        loglik = correct[:, None] * np.log(grid[None, :]) + (taken - correct)[:, None] * np.log1p(-grid[None, :])
    loglik = np.nan_to_num(loglik, nan=0.0, neginf=-1e30)
    post = np.exp(loglik - loglik.max(1, keepdims=True)) * prior[None, :]
    post /= post.sum(1, keepdims=True)
    table = _binom_pmf_table(k, grid)
    out = np.zeros((n, k + 1))
    for r in np.unique(taken):
        rows = np.flatnonzero(taken == r)
        rest = k - int(r)
        pred = post[rows] @ table[rest]  # (rows, rest + 1): remaining successes
        for x in range(rest + 1):
            out[rows, correct[rows] + x] += pred[:, x]
    return out


def adaptive_decisions(
    taken: np.ndarray, correct: np.ndarray, k: int, cfg: dict[str, Any], budgets: list[float]
) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """(settled mask, boundary ranges (low, high) as pass rates) for the current data.

    `empirical_bayes` (default): every example's full-K count gets a predictive distribution
    (its samples so far + a pass-rate prior fitted to the whole pool); each boundary's count (the
    m-th lowest / highest full-K count) gets a plausible range from those distributions (normal
    approximation of how many examples end at or below each count, at `confidence`); an example is
    settled when the probability that its full-K count reaches into the plausible range of any
    boundary is below 1 - confidence, i.e. it is confidently above or below every boundary.

    `wilson` / `clopper_pearson` (the simple rule): each boundary is the order statistic of the
    current estimates correct / taken; an example is settled when its confidence interval for the
    pass rate, projected on the samples still to come, lies strictly above or below every boundary.

    Examples with k samples are settled.
    """
    taken = np.asarray(taken, dtype=np.int64)
    correct = np.asarray(correct, dtype=np.int64)
    n = len(taken)
    positions = sorted({j for b in budgets for j in boundary_indices(n, b, cfg["strategies"])})
    settled = taken >= k
    ok = np.ones(n, dtype=bool)
    conf = float(cfg["confidence"])
    if cfg["method"] == "empirical_bayes":
        pmf = final_count_pmf(taken, correct, k, pooled_prior(taken, correct))
        below = np.cumsum(pmf, axis=1)  # P(final <= c)
        above = 1 - np.concatenate([np.zeros((n, 1)), below[:, :-1]], axis=1)  # P(final >= c)
        mu = below.sum(0)
        sd = np.sqrt(np.maximum((below * (1 - below)).sum(0), 1e-12))
        nd = NormalDist()
        cuts = []
        for j in positions:
            # P(the (j+1)-th lowest count <= c) = P(#(final <= c) >= j + 1)
            p_le = np.array([1 - nd.cdf((j + 0.5 - mu[c]) / sd[c]) for c in range(k + 1)])
            c_lo = int(np.argmax(p_le > (1 - conf)))
            c_hi = int(np.argmax(p_le >= conf)) if (p_le >= conf).any() else k
            cuts.append((c_lo / k, c_hi / k))
            ok &= (below[:, c_hi] < 1 - conf) | (above[:, c_lo] < 1 - conf)
        return settled | ok, cuts
    iv = [final_rate_interval(int(a), int(r), k, cfg["method"], conf) for a, r in zip(correct, taken)]
    lo = np.array([x[0] for x in iv])
    hi = np.array([x[1] for x in iv])
    est = np.where(taken > 0, correct / np.maximum(taken, 1), 0.5)
    srt = np.sort(est)
    cuts = [(float(srt[j]), float(srt[j])) for j in positions]
    for c, _ in cuts:
        ok &= (lo > c + 1e-12) | (hi < c - 1e-12)
    return settled | ok, cuts


def adaptive_rounds(
    n: int,
    k: int,
    cfg: dict[str, Any],
    budgets: list[float],
    draw: Callable[[np.ndarray, int, int], np.ndarray],
    log=print,
) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """Sample in rounds until every example is settled or has k samples.

    `draw(indices, first, take)` returns the correctness (bool array, len(indices) x take) of
    samples first..first+take-1 of those examples. Every unsettled example has the same number
    of samples at the start of a round. Returns (samples taken, correct, one record per round).
    """
    taken = np.zeros(n, dtype=np.int64)
    correct = np.zeros(n, dtype=np.int64)
    active = np.ones(n, dtype=bool)
    history = []
    first = 0
    while first < k and active.any():
        take = min(int(cfg["min_samples"]) if first == 0 else int(cfg["round_size"]), k - first)
        idx = np.flatnonzero(active)
        outcome = np.asarray(draw(idx, first, take), dtype=bool).reshape(len(idx), take)
        taken[idx] += take
        correct[idx] += outcome.sum(1)
        first += take
        settled, cuts = adaptive_decisions(taken, correct, k, cfg, budgets)
        active = ~settled
        history.append({"round": len(history) + 1, "first_sample": first - take, "take": take,
                        "sampled": len(idx), "still_active": int(active.sum()), "cuts": cuts})
        log(f"adaptive round {len(history)}: {len(idx)} examples x {take} samples "
            f"(now {first}/{k}); {int(active.sum())} still unsettled; boundaries "
            + ", ".join(f"{a:.3f}" if a == b else f"[{a:.3f}, {b:.3f}]" for a, b in cuts))
    return taken, correct, history


def probe_pool_adaptive(pool: pl.DataFrame, task, render: Callable[[str], str], generator_factory: Callable[[], Any],
                        settings: dict[str, Any], work_dir: Path, identity: dict[str, Any] | None = None,
                        log=print) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Adaptive probing of the whole pool (boundaries need every example), resumable per round.

    Same outputs as `probe_pool`; `k` is the number of samples an example actually got and
    `pass_rate` = n_correct / k.
    """
    cfg = adaptive_config(settings)
    budgets = _budgets(cfg["budget"])
    work_dir.mkdir(parents=True, exist_ok=True)
    sampling = Sampling.from_config(settings)
    k, seed = int(settings["k"]), int(settings["seed"])
    identity = identity or {}
    tag = settings_hash({**settings, "sampler": SAMPLER_VERSION, "adaptive": {**cfg, "budget": budgets},
                         "identity": identity})
    rows = pool.to_dicts()
    ids = [r["id"] for r in rows]
    prompts = [render(task.prompt(r)) for r in rows]
    state: dict[str, Any] = {"generator": None}

    def gen():
        if state["generator"] is None:
            state["generator"] = generator_factory()
        return state["generator"]

    def files(name: str, which: list[int]) -> Path:
        content = rows_tag([rows[i] for i in which], [prompts[i] for i in which])
        return work_dir / f"adaptive-{name}-{tag}-{content}.samples.parquet"

    parts: list[pl.DataFrame] = []

    def draw(idx: np.ndarray, first: int, take: int) -> np.ndarray:
        which = [int(i) for i in idx]
        path = files(f"s{first:04d}+{take}", which)
        found = read_chunk(path, log=log)
        if found:
            log(f"reused {path.name}")
            df = found[0]
        else:
            comps, tokens = generate_counted(gen(), [prompts[i] for i in which], take, sampling, seed=seed,
                                             desc="probe", keys=[ids[i] for i in which], first_sample=first)
            correct = [[task.is_correct(c, rows[i]["answer"], prompts[i]) for c in cs]
                       for i, cs in zip(which, comps)]
            df = pl.DataFrame(sample_rows([rows[i] for i in which], comps, correct, tokens, first),
                              schema=SAMPLES_SCHEMA)
            write_parquet_atomic(df, path)
        parts.append(df)
        pos = {ids[i]: j for j, i in enumerate(which)}
        out = np.zeros((len(which), take), dtype=bool)
        for r in df.iter_rows(named=True):
            out[pos[r["id"]], r["sample"] - first] = r["correct"]
        return out

    taken, correct, history = adaptive_rounds(len(rows), k, cfg, budgets, draw, log=log)

    gpath = work_dir / f"adaptive-greedy-{chunk_tag(settings, identity)}-{rows_tag(rows, prompts)}.parquet"
    found = read_chunk(gpath, log=log)
    if found:
        greedy = found[0]
    else:
        g = gen().generate(prompts, 1, Sampling(0.0, 1.0, sampling.max_new_tokens), seed=seed, desc="greedy",
                           keys=ids)
        greedy = pl.DataFrame({"id": ids, "greedy_correct": [task.is_correct(c[0], r["answer"], p)
                                                             for c, r, p in zip(g, rows, prompts)]})
        write_parquet_atomic(greedy, gpath)
    counts = pl.DataFrame(
        {
            "id": ids,
            "k": taken,
            "n_correct": correct,
            "pass_rate": correct / np.maximum(taken, 1),
            "greedy_correct": greedy["greedy_correct"],
            "tier": [None if r.get("tier") is None else str(r["tier"]) for r in rows],
        },
        schema={"id": pl.Utf8, "k": pl.Int64, "n_correct": pl.Int64, "pass_rate": pl.Float64,
                "greedy_correct": pl.Boolean, "tier": pl.Utf8},
    )
    order = {i: j for j, i in enumerate(ids)}
    samples = (pl.concat(parts) if parts else pl.DataFrame(schema=SAMPLES_SCHEMA))
    tokens = samples.group_by("id").agg(pl.col("tokens").sum())
    counts = counts.join(tokens, on="id", how="left", maintain_order="left").with_columns(pl.col("tokens").fill_null(0))
    samples = samples.with_columns(pl.col("id").replace_strict(order, return_dtype=pl.Int64).alias("_o"))
    samples = samples.sort(["_o", "sample"]).drop("_o")
    saved = 1 - taken.sum() / (k * len(rows))
    log(f"adaptive probing: {int(taken.sum())} of {k * len(rows)} samples ({saved:.1%} saved) in "
        f"{len(history)} rounds")
    return counts, samples


