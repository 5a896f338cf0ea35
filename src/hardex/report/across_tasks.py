"""Across the tasks of one study: which subset wins where, whether hard beats easy in general, whether a
pool's pass-rate profile says which, and whether the probe's recommendation picks the winner.

Read from the tables each task already has (the headline, the pairwise table, the probe, `recommend`), per
metric:

- `across_tasks_table`: per task, each pool's profile (shares never, sometimes and always solved by the
  base model in K probe samples) and each strategy's gain with its interval and the headline's verdict;
- `contrast_meta_analysis`: one contrast (hard minus easy) per task from the pairwise table, and their
  DerSimonian-Laird random-effects pool: the effect, its interval, the between-task spread tau and I², and
  Cochran's Q test that the tasks share one effect; then whether the pools' never-solved share orders the
  tasks' contrasts (Spearman's rho, exact permutation p over the tasks);
- `recommendation_check`: the probe's rule (`recommend`) left one task out: on each task, the direction of
  its rule (more predicted learnable share, or less, gains more) is fitted on the other tasks alone, and the
  subset it names counts as a hit where it is the candidate that gained most or is not separated from it
  (the pairwise verdict is not "differs"); beside it, "always hard" and "always random" by the same count.
  Hit rates with exact (Clopper-Pearson) intervals over tasks.

Tasks are few (the difficulty map has seven), so every figure here is an estimate over a handful of units:
the notes say how many.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np
import polars as pl

from hardex.statistics import DIFFERS, t_ppf

PROFILE = {"never_solved_pct": pl.col("pass_rate") == 0, "always_solved_pct": pl.col("pass_rate") == 1}


def pool_profile(probes: pl.DataFrame) -> pl.DataFrame:
    """Per model x task, the pool's shares (%) never, sometimes and always solved in the probe's K samples."""
    if probes.height == 0:
        return pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "pool": pl.Int64,
                                    **{c: pl.Float64 for c in (*PROFILE, "mixed_pct")}})
    return (probes.group_by(["model", "task"], maintain_order=True)
            .agg(pl.len().cast(pl.Int64).alias("pool"), *[(100 * e.mean()).alias(c) for c, e in PROFILE.items()])
            .with_columns((100 - pl.col("never_solved_pct") - pl.col("always_solved_pct")).alias("mixed_pct")))


def _metric_blocks(frame: pl.DataFrame, metrics: Sequence[str]):
    """(metric, rows of that metric) for a verdict table with or without its `metric` column."""
    for metric in metrics:
        yield metric, frame.filter(pl.col("metric") == metric) if "metric" in frame.columns else frame


def across_tasks_table(headline: pl.DataFrame, probes: pl.DataFrame, metrics: Sequence[str]) -> pl.DataFrame:
    """Per metric x model x task: the pool's profile and one column per strategy (controls left out: the
    headline reads each strategy against its own), "gain [low, high] verdict" as the headline has it."""
    profile = pool_profile(probes)
    strategies = list(dict.fromkeys(headline["strategy"])) if headline.height else []
    rows = []
    for metric, block in _metric_blocks(headline, metrics):
        for (model, task), cell in block.group_by(["model", "task"], maintain_order=True):
            row = {"metric": metric, "model": model, "task": task}
            for r in cell.iter_rows(named=True):
                interval = ("" if r["gain_ci_low"] is None or r["gain_ci_low"] != r["gain_ci_low"]
                            else f" [{r['gain_ci_low']:+.1f}, {r['gain_ci_high']:+.1f}]")
                seeds = f"{r['n_seeds']} seed{'s' if r['n_seeds'] != 1 else ''}"
                row[r["strategy"]] = f"{r['gain']:+.1f}{interval} {r['verdict']} ({seeds})"
            rows.append(row)
    schema = {"metric": pl.Utf8, "model": pl.Utf8, "task": pl.Utf8, **{s: pl.Utf8 for s in strategies}}
    table = pl.DataFrame(rows, schema=schema)
    table = table.join(profile, on=["model", "task"], how="left")
    return table.select("metric", "model", "task", "pool", *PROFILE, "mixed_pct", *strategies)


def contrast(pairwise: pl.DataFrame, a: str, b: str, level: float) -> pl.DataFrame:
    """Per model x task of the pairwise table (one metric's rows): a minus b with its interval, the standard
    error that interval implies (t over seeds; a normal approximation for a one-seed bootstrap) and seeds."""
    rows = []
    for r in pairwise.iter_rows(named=True):
        if {r["strategy"], r["versus"]} != {a, b} or r["difference"] is None or r["n_seeds"] < 1:
            continue
        sign = 1 if r["strategy"] == a else -1
        low, high = (r["difference_ci_low"], r["difference_ci_high"])[::sign]
        low, high = sign * low, sign * high
        quantile = t_ppf(0.5 + level / 2, r["n_seeds"] - 1) if r["n_seeds"] > 1 else t_ppf(0.5 + level / 2, 1e9)
        rows.append({"model": r["model"], "task": r["task"], "n_seeds": r["n_seeds"],
                     "difference": sign * r["difference"], "ci_low": low, "ci_high": high,
                     "se": (high - low) / (2 * quantile), "verdict": r["verdict"]})
    return pl.DataFrame(rows, schema={"model": pl.Utf8, "task": pl.Utf8, "n_seeds": pl.Int64, "difference": pl.Float64,
                                      "ci_low": pl.Float64, "ci_high": pl.Float64, "se": pl.Float64,
                                      "verdict": pl.Utf8})


def random_effects(effects: Sequence[float], ses: Sequence[float], level: float = 0.95) -> dict[str, float]:
    """DerSimonian-Laird random-effects pool of per-unit effects with standard errors `ses`: pooled effect,
    its standard error and interval (normal), tau² (between-unit variance), Cochran's Q with its p (chi-square,
    k - 1 df) and I² (share of the spread beyond sampling error, %). A unit with a zero standard error cannot
    be weighted: ValueError."""
    from scipy import stats

    d, se = np.asarray(effects, dtype=float), np.asarray(ses, dtype=float)
    if d.size == 0 or d.size != se.size:
        raise ValueError(f"random_effects needs effects and standard errors of one length, got {d.size}, {se.size}")
    if not (np.isfinite(se).all() and (se > 0).all()):
        raise ValueError("every unit needs a positive, finite standard error")
    w = 1 / se**2
    fixed = float((w * d).sum() / w.sum())
    q = float((w * (d - fixed) ** 2).sum())
    df = d.size - 1
    tau2 = max(0.0, (q - df) / (w.sum() - (w**2).sum() / w.sum())) if df > 0 else 0.0
    w_star = 1 / (se**2 + tau2)
    pooled = float((w_star * d).sum() / w_star.sum())
    pooled_se = float(math.sqrt(1 / w_star.sum()))
    z = float(stats.norm.ppf(0.5 + level / 2))
    return {"k": int(d.size), "pooled": pooled, "se": pooled_se, "ci_low": pooled - z * pooled_se,
            "ci_high": pooled + z * pooled_se, "p": float(2 * stats.norm.sf(abs(pooled) / pooled_se)),
            "tau": math.sqrt(tau2), "q": q, "q_p": float(stats.chi2.sf(q, df)) if df > 0 else math.nan,
            "i2_pct": 100 * max(0.0, (q - df) / q) if q > 0 and df > 0 else 0.0}


def rank_correlation(x: Sequence[float], y: Sequence[float], seed: int = 0, draws: int = 20000) -> tuple[float, float]:
    """Spearman's rho of x and y and its two-sided permutation p: exact over every ordering up to 8 units,
    else over `draws` seeded random orderings. (nan, nan) with fewer than 3 units or a constant side."""
    from scipy import stats

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan
    rx, ry = stats.rankdata(x), stats.rankdata(y)

    def rho(order) -> float:
        return float(np.corrcoef(rx, ry[list(order)])[0, 1])

    observed = rho(range(y.size))
    if y.size <= 8:
        null = np.array([rho(p) for p in itertools.permutations(range(y.size))])
    else:
        rng = np.random.default_rng(seed)
        null = np.array([rho(rng.permutation(y.size)) for _ in range(draws)])
    return observed, float((np.abs(null) >= abs(observed) - 1e-12).mean())


def contrast_meta_analysis(pairwise: pl.DataFrame, probes: pl.DataFrame, metrics: Sequence[str],
                           a: str = "hard", b: str = "easy", level: float = 0.95) -> tuple[pl.DataFrame, str]:
    """Per metric: each task's a - b (the pairwise table's, paired by seed) beside its pool's profile, then a
    row "random effects" with the pooled contrast over the tasks (`random_effects`). The note adds, per
    metric, Spearman's rho of the never-solved share against the contrast with its permutation p."""
    profile = pool_profile(probes)
    frames, sentences = [], []
    for metric, block in _metric_blocks(pairwise, metrics):
        per_task = contrast(block, a, b, level).join(profile, on=["model", "task"], how="left")
        if per_task.height == 0:
            continue
        per_task = per_task.with_columns(pl.lit(metric).alias("metric"))
        # a contrast whose seeds agree to rounding has no weight to give (1 / se² is infinite)
        usable = per_task.filter(pl.col("se").is_finite() & (pl.col("se") > 1e-9))
        pooled_row = {"metric": metric, "model": "all", "task": "random effects",
                      "n_seeds": int(usable["n_seeds"].sum())}
        if usable.height:
            fit = random_effects(usable["difference"], usable["se"], level)
            pooled_row |= {"difference": fit["pooled"], "ci_low": fit["ci_low"], "ci_high": fit["ci_high"],
                           "se": fit["se"], "p": fit["p"], "tau": fit["tau"], "i2_pct": fit["i2_pct"],
                           "q_p": fit["q_p"], "tasks": fit["k"]}
            rho, rho_p = rank_correlation(usable["never_solved_pct"], usable["difference"])
            shown = fit["ci_low"] > 0 or fit["ci_high"] < 0
            sentences.append(
                f"In {metric} accuracy, {a} - {b} pooled over {fit['k']} task{'s' if fit['k'] != 1 else ''}: "
                f"{fit['pooled']:+.1f} points [{fit['ci_low']:+.1f}, {fit['ci_high']:+.1f}] "
                f"({'shown' if shown else 'not shown'} at {round(100 * level)} %), between-task spread tau "
                f"{fit['tau']:.1f} points, I² {fit['i2_pct']:.0f} %"
                + (f", Q test of one shared effect p {fit['q_p']:.2g}" if fit["k"] > 1 else "")
                + (f"; the never-solved share against the contrast: Spearman's rho {rho:+.2f}, permutation p "
                   f"{rho_p:.2g} over {usable.height} tasks" if rho == rho else
                   "; too few tasks (or no spread) to ask whether the pool's profile orders the contrast")
                + ".")
        else:
            sentences.append(f"In {metric} accuracy no task's {a} - {b} has a standard error above zero (its seeds "
                             "agree exactly): nothing to pool.")
        frames += [per_task, pl.DataFrame([pooled_row])]
    if not frames:
        return (pl.DataFrame(schema={"metric": pl.Utf8, "model": pl.Utf8, "task": pl.Utf8}),
                f"No task ran both {a} and {b}: nothing to pool.")
    table = pl.concat(frames, how="diagonal_relaxed")
    first = ["metric", "model", "task", "n_seeds", "difference", "ci_low", "ci_high", "se"]
    table = table.select(*first, *[c for c in table.columns if c not in first])
    note = (" ".join(sentences) + f" difference: {a} minus {b} in points, final accuracy gain paired by seed (the "
            f"pairwise table's), with its {round(100 * level)} % interval; se: the standard error that interval "
            "implies (t over seeds; with one seed a normal approximation of the bootstrap over questions). "
            "random effects: the DerSimonian-Laird pool over tasks, weights 1 / (se² + tau²); tau: the spread of "
            "the true contrast between tasks; I²: the share of the observed spread beyond sampling error; q_p: "
            "Cochran's test that every task shares one contrast. Each task's pool profile (never, always solved "
            "by the base model in K samples) sits beside its contrast. Few tasks make tau and I² rough.")
    return table, note


def _hit(rule: str, winner: str, pairs: dict) -> bool:
    """Whether `rule`'s subset is the winner or its pair with the winner is not found to differ."""
    if rule == winner:
        return True
    r = pairs.get((rule, winner)) or pairs.get((winner, rule))
    return r is not None and not (r["verdict"] or "").startswith(DIFFERS)


def clopper_pearson(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact interval of a binomial share (%)."""
    from scipy import stats

    if n == 0:
        return math.nan, math.nan
    alpha = 1 - level
    low = 0.0 if hits == 0 else float(stats.beta.ppf(alpha / 2, hits, n - hits + 1))
    high = 1.0 if hits == n else float(stats.beta.ppf(1 - alpha / 2, hits + 1, n - hits))
    return 100 * low, 100 * high


def _direction(cells: list[tuple[np.ndarray, np.ndarray]]) -> int:
    """+1 where, over the given tasks, subsets with more predicted learnable share gained more (the pooled
    within-task slope), -1 where less; +1 without evidence (the mechanism's direction)."""
    num = sum(float(((x - x.mean()) * (y - y.mean())).sum()) for x, y in cells)
    return -1 if num < 0 else 1


def recommendation_check(gains: pl.DataFrame, pairwise: pl.DataFrame, recommendation: pl.DataFrame,
                         metrics: Sequence[str], rules: Sequence[str] = ("hard", "random"),
                         level: float = 0.95) -> tuple[pl.DataFrame, str]:
    """Leave one task out (see the module's docstring): per metric and held-out task, the probe's pick and each
    fixed rule's, the candidate that gained most, and whether each is a hit; then one row per rule with its
    hit rate over the tasks and its Clopper-Pearson interval. `gains`: the headline's rows (gain per model x
    task x strategy, per metric); `recommendation`: `recommend.recommend_table`, its candidates and their
    predicted learnable shares."""
    predicted = {(r["model"], r["task"], r["strategy"]): r["predicted_learnable_pct"]
                 for r in recommendation.iter_rows(named=True)}
    rows, summary = [], []
    for metric, block in _metric_blocks(gains, metrics):
        pairs_of = {}
        for r in next(b for m, b in _metric_blocks(pairwise, [metric])).iter_rows(named=True):
            pairs_of.setdefault((r["model"], r["task"]), {})[r["strategy"], r["versus"]] = r
        cells = {}  # (model, task) -> [(strategy, predicted share, gain)] of candidates that trained
        for r in block.iter_rows(named=True):
            share = predicted.get((r["model"], r["task"], r["strategy"]))
            if share is not None and r["gain"] is not None:
                cells.setdefault((r["model"], r["task"]), []).append((r["strategy"], share, r["gain"]))
        cells = {k: v for k, v in cells.items() if len(v) > 1}
        hits = {name: [] for name in ("probe", *rules)}
        for key, cell in cells.items():
            others = [(np.array([s for _, s, _ in c]), np.array([g for _, _, g in c]))
                      for k, c in cells.items() if k[1] != key[1]]  # the task left out for every model
            direction = _direction(others)
            probe_pick = max(cell, key=lambda c: (direction * c[1], c[0]))[0]
            winner = max(cell, key=lambda c: c[2])[0]
            row = {"metric": metric, "model": key[0], "task": key[1], "winner": winner,
                   "direction": "more learnable" if direction > 0 else "less learnable", "probe": probe_pick,
                   "probe_hit": _hit(probe_pick, winner, pairs_of.get(key, {}))}
            hits["probe"].append(row["probe_hit"])
            for rule in rules:
                ran = any(s == rule for s, _, _ in cell)
                row[f"{rule}_hit"] = _hit(rule, winner, pairs_of.get(key, {})) if ran else None
                if ran:
                    hits[rule].append(row[f"{rule}_hit"])
            rows.append(row)
        for name, got in hits.items():
            low, high = clopper_pearson(sum(got), len(got), level)
            summary.append({"metric": metric, "model": "all", "task": "hit rate", "rule": name, "hits": sum(got),
                            "tasks": len(got), "hit_pct": 100 * sum(got) / len(got) if got else None,
                            "hit_ci_low": low, "hit_ci_high": high})
    table = pl.concat([pl.DataFrame(rows), pl.DataFrame(summary)], how="diagonal_relaxed") if rows else \
        pl.DataFrame(schema={"metric": pl.Utf8, "model": pl.Utf8, "task": pl.Utf8})
    sentences = [f"In {s['metric']} accuracy the {'probe' if s['rule'] == 'probe' else 'always-' + s['rule']} rule "
                 f"hit on {s['hits']} of {s['tasks']} tasks ({s['hit_ci_low']:.0f}-{s['hit_ci_high']:.0f} %)."
                 for s in summary if s["tasks"]]
    note = (" ".join(sentences) + " Leave one task out: on each task the probe's rule (recommend: the candidate "
            "subset with the largest predicted learnable share) takes its direction (more or less predicted share "
            "gains more) from the other tasks alone, by the sign of their pooled within-task slope of gain on "
            "predicted share; with no other task, more. winner: the candidate that gained most on the task; a "
            "rule hits where its subset is the winner or its pair with the winner does not differ in the pairwise "
            "table (after Holm's correction), so a task where nothing is separated counts every rule as a hit. "
            f"hit_ci: exact (Clopper-Pearson) {round(100 * level)} % interval over the tasks. Candidates: subsets a "
            "user picks at a budget (not the full pool, not controls).")
    return table, note
