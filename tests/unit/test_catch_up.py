"""Paper 2's catch-up on per-example outcomes in the evaluation files' form: each strategy's final
accuracy against the full run's (overall and per tier), with the share of the full run's steps and
an interval across seeds."""

from __future__ import annotations

import math

import polars as pl
import pytest

from hardex.report.catch_up import catch_up_table
from hardex.report.statistics import seed_difference, t_interval, t_ppf

N_PER_TIER = 10


def _outcomes(rows) -> pl.DataFrame:
    """Per-example outcomes (10 examples per tier) from (strategy, seed, step, {tier: accuracy})."""
    out = []
    for strategy, seed, step, accs in rows:
        for tier, acc in accs.items():
            for i in range(N_PER_TIER):
                out.append({"model": "m", "task": "t", "benchmark": "t/test", "strategy": strategy, "seed": seed,
                            "step": step, "id": f"{tier}-{i}", "tier": tier, "n": 1,
                            "n_correct": int(i < round(N_PER_TIER * acc))})
    return pl.DataFrame(out)


# The full run: 100 steps; the lower-tier run: 45 steps (an epoch of a smaller subset). Final accuracy
# per seed and tier: tier 1 better by 10, 10, 20 points; tier 2 equal; tier 10 worse by 20, 20, 30.
FULL_FINAL = {0: {"1": 0.7, "2": 0.6, "10": 0.4}, 1: {"1": 0.8, "2": 0.6, "10": 0.4},
              2: {"1": 0.7, "2": 0.6, "10": 0.4}}
LOW_FINAL = {0: {"1": 0.8, "2": 0.6, "10": 0.2}, 1: {"1": 0.9, "2": 0.6, "10": 0.2},
             2: {"1": 0.9, "2": 0.6, "10": 0.1}}


def _runs(seeds_full=(0, 1, 2), seeds_low=(0, 1, 2)) -> pl.DataFrame:
    rows = []
    for s in seeds_full:
        rows += [("full", s, 50, {"1": 0.1, "2": 0.1, "10": 0.1}), ("full", s, 100, FULL_FINAL[s])]
    for s in seeds_low:  # its first checkpoint beats the full run: only the final one counts
        rows += [("tier_low", s, 20, {"1": 1.0, "2": 1.0, "10": 1.0}), ("tier_low", s, 45, LOW_FINAL[s])]
    return _outcomes(rows)


def _rows(table: pl.DataFrame, strategy: str = "tier_low") -> dict[str, dict]:
    return {r["tier"]: r for r in table.filter(pl.col("strategy") == strategy).iter_rows(named=True)}


def test_catch_up_compares_final_accuracies_with_the_share_of_steps():
    t = catch_up_table(_runs())
    assert t["tier"].to_list() == ["overall", "1", "2", "10"]  # tiers as numbers, overall first
    rows = _rows(t)
    assert all(r["steps"] == 45 and r["full_steps"] == 100 and r["share_pct"] == 45.0 for r in rows.values())
    assert all(r["n_seeds"] == 3 and r["interval"] == "paired t over 3 seeds" for r in rows.values())
    one = rows["1"]
    assert one["accuracy"] == pytest.approx(260 / 3) and one["full_accuracy"] == pytest.approx(220 / 3)
    assert one["difference"] == pytest.approx(40 / 3) and one["n_examples"] == N_PER_TIER
    assert (one["difference_ci_low"], one["difference_ci_high"]) == pytest.approx(t_interval([10, 10, 20]))
    assert one["difference_ci_low"] < 0 < one["difference_ci_high"] and one["matches"] is True  # not shown worse
    assert rows["2"]["difference"] == 0 and rows["2"]["difference_ci_high"] == 0 and rows["2"]["matches"] is True
    assert rows["10"]["difference_ci_high"] < 0 and rows["10"]["matches"] is False  # shown worse
    overall = rows["overall"]  # every tier has 10 examples: per seed the mean of the tiers' differences, -10/3
    assert overall["n_examples"] == 3 * N_PER_TIER and overall["difference"] == pytest.approx(-10 / 3)
    assert (overall["difference_ci_low"], overall["difference_ci_high"]) == pytest.approx((-10 / 3, -10 / 3))
    assert overall["matches"] is False
    assert catch_up_table(_runs().filter(pl.col("strategy") != "full")).height == 0  # nothing to compare with


def test_a_single_seed_gives_no_interval_and_no_verdict():
    rows = _rows(catch_up_table(_runs(seeds_full=(0,), seeds_low=(0,))))
    assert rows["1"]["difference"] == pytest.approx(10.0) and rows["1"]["interval"] == "one seed: no interval"
    assert math.isnan(rows["1"]["difference_ci_low"]) and math.isnan(rows["1"]["difference_ci_high"])
    assert all(r["matches"] is None for r in rows.values())


def test_seeds_are_paired_by_number_when_both_sides_ran_them():
    # seed effects shared by both sides cancel when paired: a constant +1 point is a sure difference
    diff, lo, hi, how = seed_difference({0: 11.0, 1: 21.0, 2: 31.0}, {2: 30.0, 0: 10.0, 1: 20.0})
    assert (diff, lo, hi) == pytest.approx((1.0, 1.0, 1.0)) and how == "paired t over 3 seeds"


def test_different_seeds_get_welchs_interval():
    diff, lo, hi, how = seed_difference({0: 1.0, 1: 2.0, 2: 3.0}, {0: 0.0, 1: 2.0})
    # variances of the means 1/3 and 1; Welch-Satterthwaite df = (4/3)^2 / ((1/3)^2 / 2 + 1^2 / 1) = 32/19
    half = t_ppf(0.975, 32 / 19) * math.sqrt(4 / 3)
    assert (diff, lo, hi) == pytest.approx((1.0, 1.0 - half, 1.0 + half)) and how == "Welch t, 3 vs 2 seeds"
    rows = _rows(catch_up_table(_runs(seeds_low=(0, 1))))
    assert rows["1"]["interval"] == "Welch t, 2 vs 3 seeds" and rows["1"]["matches"] is not None
    assert math.isnan(seed_difference({0: 1.0}, {0: 1.0, 1: 2.0})[2])  # one seed on a side: no interval
