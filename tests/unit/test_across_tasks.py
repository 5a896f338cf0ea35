"""Across the tasks of a study (hardex.report.across_tasks) and the probe's recommendation (hardex.report.recommend):
the random-effects pool, the rank correlation's exact p, the contrast's orientation, leave-one-task-out without
the held-out task's own data, and the recommendation's candidates and reason."""

from __future__ import annotations

import math

import polars as pl
import pytest

from hardex.report import across_tasks, loading, tables
from hardex.report.recommend import recommend_note, recommend_table
from tests.support import BENCHMARKS, PASS_K, write_results


def test_random_effects_pools_two_discordant_tasks_by_their_spread():
    # d = 0 and 10, each with se 1: Q = 50 on 1 df, tau² = 49, so each weighs 1 / 50 and the pool is 5 +- 5
    fit = across_tasks.random_effects([0.0, 10.0], [1.0, 1.0])
    assert fit["pooled"] == pytest.approx(5.0) and fit["tau"] == pytest.approx(7.0)
    assert fit["se"] == pytest.approx(5.0) and fit["i2_pct"] == pytest.approx(98.0) and fit["q"] == pytest.approx(50.0)
    assert fit["ci_low"] == pytest.approx(5 - 1.959964 * 5, abs=1e-4) and fit["q_p"] < 1e-10
    # one shared effect: no spread beyond sampling, the fixed-effect pool
    same = across_tasks.random_effects([3.0, 3.0, 3.0], [1.0, 2.0, 2.0])
    assert same["tau"] == 0.0 and same["i2_pct"] == 0.0 and same["pooled"] == pytest.approx(3.0)
    assert same["se"] == pytest.approx(1 / math.sqrt(1 + 0.25 + 0.25)) and same["q_p"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="positive, finite"):
        across_tasks.random_effects([1.0, 2.0], [1.0, 0.0])


def test_rank_correlation_is_exact_over_every_ordering():
    rho, p = across_tasks.rank_correlation([1, 2, 3, 4, 5], [2.0, 4.0, 5.0, 9.0, 11.0])
    assert rho == pytest.approx(1.0) and p == pytest.approx(2 / 120)  # the identity and its reverse of 5!
    rho, p = across_tasks.rank_correlation([1, 2, 3, 4, 5], [5.0, 4.0, 3.0, 2.0, 1.0])
    assert rho == pytest.approx(-1.0) and p == pytest.approx(2 / 120)
    assert all(math.isnan(v) for v in across_tasks.rank_correlation([1, 2], [1, 2]))  # too few
    assert all(math.isnan(v) for v in across_tasks.rank_correlation([1, 1, 1], [1, 2, 3]))  # no spread


def _pair(task, a, b, diff, low, high, verdict="differs", n=4):
    return {"model": "m", "task": task, "strategy": a, "versus": b, "n_seeds": n, "difference": diff,
            "difference_ci_low": low, "difference_ci_high": high, "verdict": verdict}


def test_the_contrast_is_oriented_hard_minus_easy_whichever_way_the_pair_is_stored():
    pairwise = pl.DataFrame([_pair("t1", "hard", "easy", 6.0, 2.0, 10.0), _pair("t2", "easy", "hard", 4.0, 1.0, 7.0)])
    got = across_tasks.contrast(pairwise, "hard", "easy", 0.95).sort("task")
    assert got["difference"].to_list() == [6.0, -4.0]
    assert got["ci_low"].to_list() == [2.0, -7.0] and got["ci_high"].to_list() == [10.0, -1.0]
    # the standard error the t-interval implies, over the pair's 4 seeds
    assert got["se"][0] == pytest.approx(8.0 / (2 * 3.182446), rel=1e-5)


def test_the_report_pools_hard_against_easy_over_its_tasks(tmp_path):
    f = write_results(tmp_path, seeds=(0, 1, 2))
    res = loading.load_results(f["evals"], f["bases"], f["steps"], BENCHMARKS, PASS_K)
    probes, subsets = loading.load_pool(f["probes"], f["subsets"])
    built = tables.build_tables(res, probes, subsets, n_boot=50, group_sizes={"m1": 4, "m2": 8})
    pairwise, (meta, note) = built["pairwise"][0], built["hard_vs_easy"]
    per_task = meta.filter(pl.col("task") != "random effects")
    assert per_task.height == pairwise.select("model", "task").unique().height  # every model x task ran both
    for r in per_task.iter_rows(named=True):
        stored = pairwise.filter((pl.col("model") == r["model"]) & (pl.col("task") == r["task"])
                                 & (pl.col("strategy") == "hard") & (pl.col("versus") == "easy"))
        assert r["difference"] == pytest.approx(stored["difference"][0])
    # this fixture's seeds gain alike, so no contrast has a spread to weigh by: nothing is pooled, and it says so
    pooled = meta.filter(pl.col("task") == "random effects").row(0, named=True)
    assert pooled["difference"] is None and "no task's hard - easy has a standard error above zero" in note
    across = built["across_tasks"][0]
    assert {"never_solved_pct", "always_solved_pct", "mixed_pct", "hard", "easy"} <= set(across.columns)
    assert across.height == per_task.height and across["hard"][0].startswith("+")


def _cells(winners: dict[str, str]):
    """Three candidates on each task (as recommend_table lists them), hard predicted least learnable and random
    most; `winners` names the
    strategy that gains most on each task (by 10 points, the others at 0), every pair found to differ."""
    predicted = {"hard": 10.0, "easy": 40.0, "random": 70.0}
    gains, pairs, subs = [], [], []
    for task, winner in winners.items():
        for s, share in predicted.items():
            gains.append({"model": "m", "task": task, "strategy": s, "gain": 10.0 if s == winner else 0.0})
            subs.append({"model": "m", "task": task, "strategy": s, "predicted_learnable_pct": share})
        names = list(predicted)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                pairs.append(_pair(task, a, b, 0.0, 0.0, 0.0))
    return pl.DataFrame(gains), pl.DataFrame(pairs), pl.DataFrame(subs)


def test_leaving_a_task_out_takes_the_rules_direction_from_the_other_tasks_alone():
    gains, pairs, subs = _cells({"a": "hard", "b": "hard", "c": "random"})
    table, note = across_tasks.recommendation_check(gains, pairs, subs, ["sampled"])
    per = {r["task"]: r for r in table.filter(pl.col("task") != "hit rate").iter_rows(named=True)}
    # c is left out: a and b say the less learnable gains more, so the rule picks hard there, and misses
    assert per["c"]["direction"] == "less learnable" and per["c"]["probe"] == "hard" and not per["c"]["probe_hit"]
    # a is left out: b (hard) and c (random) cancel to no slope, and the rule keeps the mechanism's direction
    assert per["a"]["direction"] == "more learnable" and per["a"]["probe"] == "random" and not per["a"]["probe_hit"]
    assert per["a"]["winner"] == "hard" and per["a"]["hard_hit"] and not per["c"]["hard_hit"] and per["c"]["random_hit"]
    rates = {r["rule"]: r for r in table.filter(pl.col("task") == "hit rate").iter_rows(named=True)}
    assert (rates["hard"]["hits"], rates["hard"]["tasks"]) == (2, 3) and rates["random"]["hits"] == 1
    assert rates["probe"]["hits"] == 0 and rates["probe"]["hit_ci_low"] == 0.0
    assert rates["probe"]["hit_ci_high"] == pytest.approx(100 * (1 - 0.025 ** (1 / 3)))  # Clopper-Pearson, 0 of 3
    assert "always-hard rule hit on 2 of 3 tasks" in note


def test_a_rule_hits_where_its_pair_with_the_winner_is_not_separated():
    gains, pairs, subs = _cells({"a": "hard", "b": "hard"})
    pairs = pairs.with_columns(pl.lit("undecided").alias("verdict"))
    table, _ = across_tasks.recommendation_check(gains, pairs, subs, ["sampled"])
    rates = {r["rule"]: r["hits"] for r in table.filter(pl.col("task") == "hit rate").iter_rows(named=True)}
    assert rates == {"probe": 2, "hard": 2, "random": 2}


def test_the_recommendation_ranks_candidate_subsets_by_their_predicted_learnable_share():
    rows = [("pool", 50.0, 50.0, None), ("full", 50.0, 50.0, None), ("hard", 30.0, 0.0, 0.0),
            ("easy", 55.0, 60.0, None), ("random", 54.6, 50.0, None), ("full_random_reward", 50.0, 50.0, None)]
    subs = pl.DataFrame([{"model": "m", "task": "t", "strategy": s, "n_examples": 10, "mean_pass_rate": 0.5,
                          "expected_learnable_pct": raw, "expected_learnable_pct_posterior": post, "tied_at": tie}
                         for s, post, raw, tie in rows])
    table = recommend_table(subs)
    assert table["strategy"].to_list() == ["easy", "random", "hard"]  # not the pool, the full pool or a control
    assert table["rank"].to_list() == [1, 2, 3] and set(table["recommended"]) == {"easy"}
    note = recommend_note(table)
    assert note.startswith("m on t: train on easy: its subset's GRPO groups are expected to mix 55 %")
    assert "within a point of random: the probe does not tell them apart" in note
    with pytest.raises(ValueError, match="group sizes"):
        recommend_table(subs.drop("expected_learnable_pct_posterior"))


def test_no_subset_is_recommended_where_none_is_predicted_to_give_a_gradient():
    subs = pl.DataFrame([{"model": "m", "task": "t", "strategy": s, "n_examples": 4, "mean_pass_rate": 0.0,
                          "expected_learnable_pct": 0.0, "expected_learnable_pct_posterior": v, "tied_at": 0.0}
                         for s, v in (("hard", 0.4), ("easy", 1.2))])
    table = recommend_table(subs)
    assert set(table["recommended"]) == {"none"} and table["strategy"].to_list() == ["easy", "hard"]
    assert recommend_note(table).startswith("m on t: no subset is recommended: no candidate's GRPO groups are "
                                            "predicted to mix in 5 % of steps")
