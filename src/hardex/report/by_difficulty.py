"""Gain by difficulty: the test questions binned by how often the base model itself solved them, each run's
accuracy per bin beside the base model's (the `gain_by_difficulty` table and figure).

A question's difficulty is the base model's own pass rate on it, from its evaluation samples pooled over every
seed's base evaluation (the questions are the same, only the sampling noise differs). Binning on those samples
and reading the base's accuracy per bin off the same samples would flatter every bin's gain: a question lands in
the "never solved" bin partly by bad luck, so the base's 0 % there is an underestimate that a trained run,
sampled afresh, regresses away from even if it learned nothing. So the samples of each question are split in two
at random (a hypergeometric draw of the right ones among half of them, as a random half of the samples would
give): one half places the question in its bin, the other measures the base model's accuracy in it. A bin's gain
then is a trained run's accuracy on its questions minus the base's on the held-out half, and under no learning it
is zero in every bin.

Greedy accuracy (`report.metrics`) bins the same questions the same way (by sampled pass rate, the difficulty),
with the base model's greedy answer as its accuracy: it is one answer, not chosen by the split's draws.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import polars as pl

from hardex.report.loading import Results
from hardex.selection import strategy_sort_key
from hardex.statistics import bootstrap_mean_interval, t_interval

#: the bins, by the base model's pass rate on the half of its samples that places a question: never solved,
#: solved in up to a third, up to two thirds, more, and always solved
BINS = ("0", "(0, 1/3]", "(1/3, 2/3]", "(2/3, 1)", "1")

SCHEMA = {"metric": pl.Utf8, "model": pl.Utf8, "task": pl.Utf8, "benchmark": pl.Utf8, "bin": pl.Utf8,
          "n_questions": pl.Int64, "base_accuracy": pl.Float64, "strategy": pl.Utf8, "n_seeds": pl.Int64,
          "accuracy": pl.Float64, "gain": pl.Float64, "gain_ci_low": pl.Float64, "gain_ci_high": pl.Float64}


def difficulty_bin(rate: float) -> str:
    """The bin of a pass rate in [0, 1] (BINS)."""
    if rate <= 0:
        return BINS[0]
    if rate >= 1:
        return BINS[4]
    return BINS[1] if rate <= 1 / 3 else BINS[2] if rate <= 2 / 3 else BINS[3]


def split_base(base: pl.DataFrame, seed: int = 0) -> pl.DataFrame:
    """id, bin, base_sampled: the base model's samples of each question (rows id, n, n_correct, any number per
    question: one per seed) pooled and split at random in two, the first half (n // 2 samples) placing the
    question in its bin, the rest giving its sampled accuracy. Questions with fewer than 2 samples are left out:
    they cannot be split."""
    pooled = base.group_by("id").agg(pl.col("n").sum(), pl.col("n_correct").sum()).filter(pl.col("n") >= 2).sort("id")
    n, c = pooled["n"].to_numpy(), pooled["n_correct"].to_numpy()
    half = n // 2
    rng = np.random.default_rng(seed)
    placed = rng.hypergeometric(c, n - c, half) if n.size else np.zeros(0, dtype=int)
    return pl.DataFrame({"id": pooled["id"], "bin": [difficulty_bin(r) for r in placed / np.maximum(half, 1)],
                         "base_sampled": (c - placed) / (n - half)}, schema={"id": pl.Utf8, "bin": pl.Utf8,
                                                                             "base_sampled": pl.Float64})


def _final(runs: pl.DataFrame) -> pl.DataFrame:
    """strategy, seed, id, acc: each run's last checkpoint, its accuracy per question."""
    last = runs.group_by("strategy", "seed").agg(pl.col("step").max().alias("_last"))
    return (runs.join(last, on=["strategy", "seed"]).filter(pl.col("step") == pl.col("_last"))
            .select("strategy", "seed", "id", (pl.col("n_correct") / pl.col("n")).alias("acc")))


def _interval(per_seed: list[float], per_question: np.ndarray, level: float, n_boot: int,
              seed: int) -> tuple[float, float]:
    """A bin's gain interval: t over seeds with several, else the bootstrap over the bin's questions (which
    holds the trained checkpoint fixed); none with one question and one seed."""
    if len(per_seed) > 1:
        return t_interval(per_seed, level)
    if per_question.size > 1:
        return tuple(100 * v for v in bootstrap_mean_interval(per_question, level, n_boot, seed))
    return (math.nan, math.nan)


def gain_by_difficulty(res: Results, metrics: Sequence[str] = ("sampled",), level: float = 0.95,
                       n_boot: int = 2000, seed: int = 0) -> pl.DataFrame:
    """Per metric x model x task x difficulty bin (on the task's first benchmark): the bin's questions, the base
    model's accuracy in % on them (held-out samples, or its greedy answer) and per strategy its final checkpoint's
    accuracy (mean over seeds), the gain in points and its interval (`_interval`). Bins without questions are
    left out."""
    rows = []
    for metric in metrics:
        scored = res.in_metric(metric)
        for (model, task), sampled_base in res.base.group_by(["model", "task"], maintain_order=True):
            bench = res.in_distribution(task)
            split = split_base(sampled_base.filter(pl.col("benchmark") == bench), seed)
            if metric == "sampled":
                base = split.rename({"base_sampled": "base"})
            else:
                own = scored.base.filter((pl.col("model") == model) & (pl.col("task") == task)
                                         & (pl.col("benchmark") == bench))
                base = split.join(own.group_by("id").agg((pl.col("n_correct") / pl.col("n")).mean().alias("base")),
                                  on="id").select("id", "bin", "base")
            runs = _final(scored.runs.filter((pl.col("model") == model) & (pl.col("task") == task)
                                             & (pl.col("benchmark") == bench))).join(base, on="id")
            strategies = sorted(set(runs["strategy"]), key=strategy_sort_key)
            for b in BINS:
                in_bin = base.filter(pl.col("bin") == b)
                if in_bin.height == 0:
                    continue
                base_acc = float(in_bin["base"].mean())
                for strategy in strategies:
                    mine = runs.filter((pl.col("strategy") == strategy) & (pl.col("bin") == b))
                    by_seed = mine.group_by("seed").agg(pl.col("acc").mean()).sort("seed")
                    per_seed = [100 * (a - base_acc) for a in by_seed["acc"]]
                    per_question = (mine.group_by("id").agg(pl.col("acc").mean(), pl.col("base").first())
                                    .sort("id").select(pl.col("acc") - pl.col("base")).to_series().to_numpy())
                    low, high = _interval(per_seed, per_question, level, n_boot, seed)
                    rows.append({"metric": metric, "model": model, "task": task, "benchmark": bench, "bin": b,
                                 "n_questions": in_bin.height, "base_accuracy": 100 * base_acc, "strategy": strategy,
                                 "n_seeds": by_seed.height, "accuracy": 100 * float(by_seed["acc"].mean()),
                                 "gain": sum(per_seed) / len(per_seed), "gain_ci_low": low, "gain_ci_high": high})
    return pl.DataFrame(rows, schema=SCHEMA)


def gain_by_difficulty_note(level: float, n_boot: int) -> str:
    """The gain_by_difficulty table's note."""
    pct = f"{round(100 * level)} %"
    return (f"Test questions of each task's first benchmark binned by the base model's own pass rate on them "
            f"({', '.join(BINS)}): each question's base samples, pooled over every seed's base evaluation, split at "
            f"random in two, one "
            f"half placing it in its bin and the other giving the base model's accuracy there (base_accuracy, %), "
            f"so that a bin is not flattered by the luck that put a question in it. accuracy: each strategy's final "
            f"checkpoint on the bin's questions (%, mean over seeds); gain = accuracy - base_accuracy in points, "
            f"with its {pct} interval: t over seeds with several, else a bootstrap over the bin's questions "
            f"({n_boot} resamples; it holds the checkpoint fixed); uncorrected, one per row, and wide in a small "
            f"bin (n_questions). In greedy accuracy the bins are the same and base_accuracy is the base model's "
            f"greedy answer. A gain in bin 0 is what the base never solved in half its samples, not proof of "
            f"new solving: the pass_at_k table tests that against sharpening.")
