"""Gain by difficulty (hardex.report.by_difficulty): test questions binned by the base model's own pass rate,
the base's accuracy per bin from the half of its samples that did not place the question there."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from hardex.report import loading
from hardex.report.by_difficulty import BINS, difficulty_bin, gain_by_difficulty, split_base

N_QUESTIONS, BASE_SEEDS, BASE_SAMPLES, RUN_SAMPLES = 300, 4, 8, 2


def simulated(learned: float = 0.0, run_seeds=range(4), seed: int = 0) -> loading.Results:
    """Questions with pass rates from a U-shaped Beta (many never or always solved); the base sampled 8 times a
    seed, each run 2 times per question at the base's pass rate moved `learned` of the way toward 1."""
    rng = np.random.default_rng(seed)
    p = rng.beta(0.4, 0.6, N_QUESTIONS)
    p[: N_QUESTIONS // 5] = 0.0  # a fifth the base can never solve
    ids = [f"q{i:03d}" for i in range(N_QUESTIONS)]
    common = {"model": "m", "task": "t", "benchmark": "t/test", "tier": "1"}
    base = [{**common, "seed": s, "id": q, "n": BASE_SAMPLES, "n_correct": int(rng.binomial(BASE_SAMPLES, pq)),
             "greedy_correct": int(pq > 0.5)} for s in range(BASE_SEEDS) for q, pq in zip(ids, p)]
    trained = p + learned * (1 - p)
    runs = [{**common, "strategy": "hard", "seed": s, "step": 16, "id": q, "n": RUN_SAMPLES,
             "n_correct": int(rng.binomial(RUN_SAMPLES, pq)), "greedy_correct": int(pq > 0.5)}
            for s in run_seeds for q, pq in zip(ids, trained)]
    return loading.Results(pl.DataFrame(runs), pl.DataFrame(base), loading.load_steps([]), {"t": ["t/test"]},
                           {"t/test": [1, 2]})


def test_bins_run_from_never_to_always_solved():
    assert [difficulty_bin(r) for r in (0.0, 0.1, 1 / 3, 0.5, 2 / 3, 0.9, 1.0)] == \
        [BINS[0], BINS[1], BINS[1], BINS[2], BINS[2], BINS[3], BINS[4]]


def test_the_split_places_each_question_by_half_its_samples_and_measures_the_base_on_the_rest():
    base = pl.DataFrame({"id": ["a", "a", "b", "c"], "n": [4, 4, 8, 1], "n_correct": [0, 0, 8, 1]})
    split = split_base(base).sort("id")
    # a: 8 samples, none right (bin 0, accuracy 0); b: always right; c: one sample cannot be split
    assert split["id"].to_list() == ["a", "b"]
    assert split["bin"].to_list() == [BINS[0], BINS[4]] and split["base_sampled"].to_list() == [0.0, 1.0]
    # a question right in 4 of 8: its placing half holds 0-4 of them, the held-out half the rest
    mixed = split_base(pl.DataFrame({"id": [f"q{i}" for i in range(200)], "n": [8] * 200, "n_correct": [4] * 200}))
    placed = {"0": 0.0, "(0, 1/3]": 0.25, "(1/3, 2/3]": 0.5, "(2/3, 1)": 0.75, "1": 1.0}
    for b, held_out in zip(mixed["bin"], mixed["base_sampled"]):
        assert placed[b] * 4 + held_out * 4 == pytest.approx(4.0)
    assert len(set(mixed["bin"])) >= 4  # the draw is random, not always the even split


def test_without_learning_no_bin_gains_though_binning_on_the_same_samples_would_show_one():
    table = gain_by_difficulty(simulated(learned=0.0), n_boot=200)
    assert set(table["bin"]) == set(BINS) and table["n_questions"].sum() == N_QUESTIONS
    for row in table.iter_rows(named=True):
        assert row["gain_ci_low"] <= 0 <= row["gain_ci_high"], row
    # the bias the split removes: the never-solved bin read off the samples that placed its questions has a base
    # accuracy of 0 by construction, and a run that learned nothing is above it
    res = simulated(learned=0.0)
    pooled = res.base.group_by("id").agg(pl.col("n").sum(), pl.col("n_correct").sum())
    never = pooled.filter(pl.col("n_correct") == 0)["id"]
    lucky = res.runs.filter(pl.col("id").is_in(never.implode()))
    assert lucky["n_correct"].sum() > 0  # questions of small pass rate that 32 samples missed


def test_learning_shows_where_the_base_was_weak_and_greedy_reads_the_same_bins():
    res = simulated(learned=0.5)
    table = gain_by_difficulty(res, metrics=("sampled", "greedy"), n_boot=200)
    sampled = table.filter(pl.col("metric") == "sampled")
    by_bin = dict(zip(sampled["bin"], sampled["gain"]))
    assert by_bin[BINS[0]] > 20 and by_bin[BINS[0]] > by_bin[BINS[3]] > 0  # most room where the base was weakest
    assert sampled.filter(pl.col("bin") == BINS[0])["gain_ci_low"][0] > 0
    greedy = table.filter(pl.col("metric") == "greedy")
    assert greedy.select("bin", "n_questions").equals(sampled.select("bin", "n_questions"))
    # the base model's greedy answer: right where p > 0.5, so 0 in the never-solved bin
    assert greedy.filter(pl.col("bin") == BINS[0])["base_accuracy"][0] == 0.0


def test_one_seed_takes_its_interval_over_the_bins_questions():
    table = gain_by_difficulty(simulated(learned=0.3, run_seeds=[0]), n_boot=200)
    assert (table["n_seeds"] == 1).all()
    assert all(math.isfinite(v) for v in table["gain_ci_low"]) and (table["gain_ci_low"] <= table["gain"]).all()
