"""Sharpening against new solving: the base model's pass@k at large k beside each strategy's final
checkpoint (the `pass_at_k` table and figure).

RLVR mostly raises pass@1 within what the base model already solves at large k (Yue et al. 2025,
arXiv 2504.13837): with K samples (`evaluation.base_pass_k`) the base's pass@K bounds what sharpening
alone can reach, and `beyond_base_pct` counts the test questions the trained model solves that the base
never did in K tries. Greedy accuracy (`evaluation.greedy`) sits beside sampled pass@1: a policy that is
only sharpened moves its sampled accuracy toward its greedy one.
"""

from __future__ import annotations

import math

import polars as pl

from hardex.metrics import pass_at_k
from hardex.report.loading import Results
from hardex.selection import strategy_sort_key


def k_values(n: int) -> list[int]:
    """1, 2, 4, ... up to n samples, and n itself when it is not a power of two."""
    ks = [2**i for i in range(n.bit_length()) if 2**i <= n]
    return ks + ([n] if ks[-1] != n else [])


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


def pass_at_k_table(res: Results) -> pl.DataFrame:
    """Per model x task, on the task's first benchmark: the base model's row (strategy "base") and each
    strategy's final checkpoint: n_samples per question, greedy accuracy (%, where stored), pass@k (%) for
    k = 1, 2, 4, ... up to the base's samples (a strategy's columns beyond its own samples are empty), and
    beyond_base_pct: the % of questions the final checkpoint solves in at least one of its samples that the
    base never solved in all of its own (of the same run seed). Means over seeds; the base is evaluated once
    per run seed, each with its own samples."""
    rows = []
    for (model, task), base_all in res.base.group_by(["model", "task"], maintain_order=True):
        bench = res.in_distribution(task)
        base_all = base_all.filter(pl.col("benchmark") == bench)
        if base_all.height == 0:
            continue
        ks = k_values(int(base_all["n"].min()))
        base_seeds = [g for _, g in base_all.group_by("seed", maintain_order=True)]
        per_seed = [_pass_row(g, ks) for g in base_seeds]
        rows.append({"model": model, "task": task, "benchmark": bench, "strategy": "base",
                     "n_seeds": len(base_seeds), "step": 0, "n_samples": int(base_all["n"].min()),
                     "greedy": _mean([_greedy(g) for g in base_seeds]),
                     **{c: _mean([r[c] for r in per_seed]) for c in per_seed[0]}, "beyond_base_pct": None})
        runs = res.runs.filter((pl.col("model") == model) & (pl.col("task") == task) & (pl.col("benchmark") == bench))
        for (strategy,), grp in runs.group_by(["strategy"], maintain_order=True):
            finals, beyond = [], []
            for (seed,), run in grp.group_by(["seed"], maintain_order=True):
                final = run.filter(pl.col("step") == run["step"].max())
                if int(final["step"][0]) == 0:
                    continue
                finals.append(final)
                base = base_all.filter(pl.col("seed") == seed)
                base = base if base.height else base_seeds[0]  # a base file from before seeds were kept
                j = final.select("id", pl.col("n_correct").alias("f")).join(
                    base.select("id", pl.col("n_correct").alias("b")), on="id", how="inner")
                beyond.append(100 * float(((j["b"] == 0) & (j["f"] > 0)).mean()) if j.height else None)
            if not finals:
                continue
            per_seed = [_pass_row(f, ks) for f in finals]
            rows.append({"model": model, "task": task, "benchmark": bench, "strategy": strategy,
                         "n_seeds": len(finals), "step": max(int(f["step"][0]) for f in finals),
                         "n_samples": min(int(f["n"].min()) for f in finals),
                         "greedy": _mean([_greedy(f) for f in finals]),
                         **{c: _mean([r[c] for r in per_seed]) for c in per_seed[0]},
                         "beyond_base_pct": _mean(beyond)})
    if not rows:
        return pl.DataFrame(schema={"model": pl.Utf8, "task": pl.Utf8, "benchmark": pl.Utf8, "strategy": pl.Utf8})
    df = pl.DataFrame(rows, infer_schema_length=None)
    ks = sorted({int(c.split("@")[1]) for c in df.columns if c.startswith("pass@")})
    cols = ["model", "task", "benchmark", "strategy", "n_seeds", "step", "n_samples", "greedy",
            *[f"pass@{k}" for k in ks], "beyond_base_pct"]
    df = df.select(cols).with_columns(pl.col("greedy", "beyond_base_pct", *[f"pass@{k}" for k in ks]).cast(pl.Float64))
    ranked = sorted(df["strategy"].unique(), key=lambda st: (-1, "") if st == "base" else strategy_sort_key(st))
    return df.sort(["model", "task", pl.col("strategy").replace_strict({st: i for i, st in enumerate(ranked)},
                                                                       return_dtype=pl.Int64)])


PASS_AT_K_NOTE = (
    "On each task's first benchmark: pass@k in % (unbiased estimator, mean over questions, then over seeds) of "
    "the base model, with k = 1, 2, 4, ... up to its samples per question (n_samples: evaluation.base_pass_k "
    "where set), and of each strategy's final checkpoint with its own samples (columns beyond them empty). "
    "greedy: accuracy in % of one greedy completion per question (evaluation.greedy; empty without it). "
    "beyond_base_pct: % of questions the final checkpoint solves at least once that the base never solved in "
    "its n_samples tries (same run seed): training that only sharpens the base raises pass@1 toward the base's "
    "pass@k and leaves this near 0 (arXiv 2504.13837)."
)
