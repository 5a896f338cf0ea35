"""Paper 2's catch-up on per-example outcomes in the evaluation files' form: each strategy's final
accuracy against the full run's (overall and per tier), with the share of the full run's steps and
an interval across seeds."""

from __future__ import annotations

import math

import polars as pl
import pytest

from hardex.report.catch_up import catch_up_table, tier_curves
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
    # the catch-up share too: reached at its first checkpoint (step 20), with no interval at either end
    assert rows["1"]["reached_seeds"] == 1 and rows["1"]["catch_up_pct"] == 20.0
    assert math.isnan(rows["1"]["catch_up_ci_low"]) and math.isnan(rows["1"]["catch_up_ci_high"])


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


def _curves(low_curves, base=None, full_seeds=(0, 1, 2)) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The full run (100 steps, tier 1 at 0.5 then FULL_FINAL) and a tier run whose tier-1 accuracy
    at steps 15, 30, 45 is given per seed; tiers 2 and 10 as LOW_FINAL throughout."""
    rows = []
    for s in full_seeds:
        rows += [("full", s, 50, {"1": 0.5, "2": 0.1, "10": 0.1}), ("full", s, 100, FULL_FINAL[s])]
    for s, accs in low_curves.items():
        rows += [("tier_low", s, step, {**LOW_FINAL[s], "1": acc}) for step, acc in zip((15, 30, 45), accs)]
    runs = _outcomes(rows)
    if base is None:
        return runs, None
    b = _outcomes([("base", s, 0, accs) for s, accs in base.items()]).drop("strategy", "step")
    return runs, b


def test_a_shorter_run_that_reaches_the_full_run_gets_its_share_of_the_steps_with_an_interval():
    # tier 1, full run's final: 0.7, 0.8, 0.7. Seed 0 reaches it at step 15, seeds 1 and 2 at step 30
    runs, _ = _curves({0: [0.7, 0.7, 0.8], 1: [0.7, 0.8, 0.9], 2: [0.6, 0.7, 0.9]})
    one = _rows(catch_up_table(runs))["1"]
    assert one["share_pct"] == 45.0 and one["reached_seeds"] == 3
    assert one["catch_up_pct"] == pytest.approx(25.0)  # shares 15, 30, 30 % of the full run's 100 steps
    low, high = t_interval([15, 30, 30])
    assert one["catch_up_ci_low"] == pytest.approx(max(0.0, low)) and one["catch_up_ci_high"] == pytest.approx(high)
    assert one["catch_up_pct"] < one["share_pct"] < 100  # caught up before its own end, at a fraction of full's steps
    ten = _rows(catch_up_table(runs))["10"]  # 0.2 against 0.4 at every checkpoint: never reaches it
    assert ten["reached_seeds"] == 0 and ten["catch_up_pct"] is None and ten["catch_up_ci_high"] is None


def test_a_seed_that_never_reaches_the_full_run_leaves_the_share_without_a_mean():
    runs, _ = _curves({0: [0.7, 0.7, 0.8], 1: [0.5, 0.6, 0.7], 2: [0.6, 0.7, 0.9]})  # seed 1 stays below 0.8
    one = _rows(catch_up_table(runs))["1"]
    assert one["reached_seeds"] == 2 and one["n_seeds"] == 3
    assert one["catch_up_pct"] is None and one["catch_up_ci_low"] is None  # a mean over the seeds that reached would flatter


def test_the_base_model_is_step_0_so_a_full_run_that_loses_accuracy_is_caught_at_once():
    # the base model already has tier 1 at 0.9, above every full run's final: caught up at step 0
    runs, base = _curves({0: [0.1, 0.1, 0.1], 1: [0.1, 0.1, 0.1], 2: [0.1, 0.1, 0.1]},
                         base={s: {"1": 0.9, "2": 0.1, "10": 0.1} for s in (0, 1, 2)})
    assert _rows(catch_up_table(runs))["1"]["reached_seeds"] == 0  # without the base, never
    one = _rows(catch_up_table(runs, base=base))["1"]
    assert one["reached_seeds"] == 3 and one["catch_up_pct"] == 0.0 and one["catch_up_ci_low"] == 0.0
    assert one["base_accuracy"] == pytest.approx(90.0) and one["full_accuracy"] < one["base_accuracy"]
    assert _rows(catch_up_table(runs))["1"]["base_accuracy"] is None  # no base evaluation given


def test_without_the_same_seeds_a_run_is_held_to_the_mean_of_the_full_runs():
    # full runs of seeds 0 and 1 only: tier 1's final mean 0.75. Seed 2 reaches 0.8 at step 45, not 0.7 at 30
    runs, _ = _curves({0: [0.7, 0.7, 0.8], 1: [0.7, 0.8, 0.9], 2: [0.6, 0.7, 0.9]}, full_seeds=(0, 1))
    one = _rows(catch_up_table(runs))["1"]
    assert one["catch_up_pct"] == pytest.approx((45 + 30 + 45) / 3)


def test_tier_curves_start_at_the_base_model_and_are_drawn_against_the_full_runs_steps(tmp_path):
    from hardex.report.plots import plot_tier_curves

    runs, base = _curves({0: [0.7, 0.7, 0.8], 1: [0.7, 0.8, 0.9], 2: [0.6, 0.7, 0.9]},
                         base={s: {"1": 0.5, "2": 0.5, "10": 0.0} for s in (0, 1, 2)})
    curves = tier_curves(runs, base)
    assert set(curves["full_steps"]) == {100}
    low = curves.filter((pl.col("strategy") == "tier_low") & (pl.col("seed") == 1))
    assert low["step"].unique().sort().to_list() == [0, 15, 30, 45]  # the base model, then its checkpoints
    assert low.filter((pl.col("step") == 0) & (pl.col("tier") == "10"))["accuracy"].item() == 0.0
    assert low.filter((pl.col("step") == 30) & (pl.col("tier") == "1"))["accuracy"].item() == pytest.approx(0.8)
    paths = plot_tier_curves(curves, {"t": ["t/test"]}, [tmp_path / "tiers.png", tmp_path / "tiers.pdf"], {"dpi": 60})
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths[1].read_bytes()[:5] == b"%PDF-"
