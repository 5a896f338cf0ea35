"""Paper 2's catch-up on per-example outcomes in the evaluation files' form: each strategy's share of
the full run's steps, and whether its final accuracy is equivalent to the full run's within a margin
(a paired test over seeds), overall and per tier; the first crossing of the full run's final accuracy
as a secondary column. Curves are constructed so that the answer is known."""

from __future__ import annotations

import math

import polars as pl
import pytest

from hardex.report.catch_up import NO_GAIN, NOT_SHOWN, catch_up_table, equivalence_verdict, tier_curves
from hardex.statistics import seed_difference, t_interval, t_ppf

N_PER_TIER = 10


def _outcomes(rows, samples: int = 1) -> pl.DataFrame:
    """Per-example outcomes (10 examples per tier) from (strategy, seed, step, {tier: accuracy}): with one
    sample per example, the first round(10 x accuracy) examples right; with `samples` > 1, every example
    right in round(samples x accuracy) of its samples (accuracies to 1 / samples)."""
    out = []
    for strategy, seed, step, accs in rows:
        for tier, acc in accs.items():
            for i in range(N_PER_TIER):
                right = round(samples * acc) if samples > 1 else int(i < round(N_PER_TIER * acc))
                out.append({"model": "m", "task": "t", "benchmark": "t/test", "strategy": strategy, "seed": seed,
                            "step": step, "id": f"{tier}-{i}", "tier": tier, "n": samples, "n_correct": right})
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


def test_the_share_is_the_runs_own_steps_and_final_accuracies_are_tested_for_equivalence():
    t = catch_up_table(_runs())
    assert t["tier"].to_list() == ["overall", "1", "2", "10"]  # tiers as numbers, overall first
    rows = _rows(t)
    # the share: the tier run's own steps over the full run's, whatever its curve did before its end
    assert all(r["steps"] == 45 and r["full_steps"] == 100 and r["share_pct"] == 45.0 for r in rows.values())
    assert all(r["n_seeds"] == 3 and r["interval"] == "paired t over 3 seeds, 90 %" for r in rows.values())
    assert all(r["margin"] == 5.0 and r["full_gain"] is None for r in rows.values())  # no base given: gain unknown
    one = rows["1"]
    assert one["accuracy"] == pytest.approx(260 / 3) and one["full_accuracy"] == pytest.approx(220 / 3)
    assert one["difference"] == pytest.approx(40 / 3) and one["n_examples"] == N_PER_TIER
    # the equivalence test's interval: 90 % (two one-sided tests at 5 %), paired by seed
    assert (one["difference_ci_low"], one["difference_ci_high"]) == pytest.approx(t_interval([10, 10, 20], 0.90))
    assert one["difference_ci_low"] < 5 < one["difference_ci_high"] and one["equivalent"] == NOT_SHOWN
    assert rows["2"]["difference"] == 0 and rows["2"]["difference_ci_high"] == 0 and rows["2"]["equivalent"] == "yes"
    assert rows["10"]["difference_ci_high"] < -5 and rows["10"]["equivalent"] == "no"  # shown worse by more than 5
    overall = rows["overall"]  # every tier has 10 examples: per seed the mean of the tiers' differences, -10/3
    assert overall["n_examples"] == 3 * N_PER_TIER and overall["difference"] == pytest.approx(-10 / 3)
    assert (overall["difference_ci_low"], overall["difference_ci_high"]) == pytest.approx((-10 / 3, -10 / 3))
    assert overall["equivalent"] == "yes"
    assert _rows(catch_up_table(_runs(), margin=3))["overall"]["equivalent"] == "no"  # the margin decides
    assert catch_up_table(_runs().filter(pl.col("strategy") != "full")).height == 0  # nothing to compare with


def test_a_single_seed_gives_no_interval_and_no_verdict():
    rows = _rows(catch_up_table(_runs(seeds_full=(0,), seeds_low=(0,))))
    assert rows["1"]["difference"] == pytest.approx(10.0) and rows["1"]["interval"] == "one seed: no interval"
    assert math.isnan(rows["1"]["difference_ci_low"]) and math.isnan(rows["1"]["difference_ci_high"])
    assert all(r["equivalent"] == NOT_SHOWN for r in rows.values())  # even tier 2, equal to the point
    # the first crossing too: reached at its first checkpoint (step 20), with no interval at either end
    assert rows["1"]["reached_seeds"] == 1 and rows["1"]["first_crossing_share"] == 20.0
    assert math.isnan(rows["1"]["first_crossing_ci_low"]) and math.isnan(rows["1"]["first_crossing_ci_high"])


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
    assert rows["1"]["interval"] == "Welch t, 2 vs 3 seeds, 90 %" and rows["1"]["equivalent"] == NOT_SHOWN
    assert rows["2"]["equivalent"] == "yes"  # 0.6 on every seed of both sides: no spread, no difference
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


def test_the_first_crossing_is_a_secondary_share_with_an_interval():
    # tier 1, full run's final: 0.7, 0.8, 0.7. Seed 0 reaches it at step 15, seeds 1 and 2 at step 30
    runs, _ = _curves({0: [0.7, 0.7, 0.8], 1: [0.7, 0.8, 0.9], 2: [0.6, 0.7, 0.9]})
    one = _rows(catch_up_table(runs))["1"]
    assert one["share_pct"] == 45.0 and one["reached_seeds"] == 3
    assert one["first_crossing_share"] == pytest.approx(25.0)  # shares 15, 30, 30 % of the full run's 100 steps
    low, high = t_interval([15, 30, 30])
    assert one["first_crossing_ci_low"] == pytest.approx(max(0.0, low))
    assert one["first_crossing_ci_high"] == pytest.approx(high)
    assert one["first_crossing_share"] < one["share_pct"] < 100  # crossed before its own end
    ten = _rows(catch_up_table(runs))["10"]  # 0.2 against 0.4 at every checkpoint: never reaches it
    assert ten["reached_seeds"] == 0 and ten["first_crossing_share"] is None and ten["first_crossing_ci_high"] is None


def test_a_seed_that_never_reaches_the_full_run_leaves_the_share_without_a_mean():
    runs, _ = _curves({0: [0.7, 0.7, 0.8], 1: [0.5, 0.6, 0.7], 2: [0.6, 0.7, 0.9]})  # seed 1 stays below 0.8
    one = _rows(catch_up_table(runs))["1"]
    assert one["reached_seeds"] == 2 and one["n_seeds"] == 3
    # a mean over those that reached would flatter
    assert one["first_crossing_share"] is None and one["first_crossing_ci_low"] is None


def test_a_full_run_that_loses_accuracy_gives_no_share_and_no_verdict():
    # the base model already has tier 1 at 0.9, above every full run's final: the full run taught nothing
    # there, so "matching it in fewer steps" means nothing (the old first crossing said 0 % of its steps)
    runs, base = _curves({0: [0.1, 0.1, 0.1], 1: [0.1, 0.1, 0.1], 2: [0.1, 0.1, 0.1]},
                         base={s: {"1": 0.9, "2": 0.1, "10": 0.1} for s in (0, 1, 2)})
    one = _rows(catch_up_table(runs, base=base))["1"]
    assert one["base_accuracy"] == pytest.approx(90.0) and one["full_gain"] == pytest.approx(-50 / 3)
    assert one["equivalent"] == NO_GAIN and one["share_pct"] is None
    assert one["first_crossing_share"] is None and one["steps"] == 45 and one["full_steps"] == 100
    # tier 2: from 0.1 to 0.6 on every seed, a sure gain: the share and the verdict stand
    two = _rows(catch_up_table(runs, base=base))["2"]
    assert two["full_gain"] == pytest.approx(50.0) and two["share_pct"] == 45.0 and two["equivalent"] == "yes"
    no_base = _rows(catch_up_table(runs))["1"]  # no base evaluation given: the gain is unknown, not checked
    assert no_base["base_accuracy"] is None and no_base["full_gain"] is None and no_base["share_pct"] == 45.0


def test_without_the_same_seeds_a_run_is_held_to_the_mean_of_the_full_runs():
    # full runs of seeds 0 and 1 only: tier 1's final mean 0.75. Seed 2 reaches 0.8 at step 45, not 0.7 at 30
    runs, _ = _curves({0: [0.7, 0.7, 0.8], 1: [0.7, 0.8, 0.9], 2: [0.6, 0.7, 0.9]}, full_seeds=(0, 1))
    one = _rows(catch_up_table(runs))["1"]
    assert one["first_crossing_share"] == pytest.approx((45 + 30 + 45) / 3)


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


# ---- equivalence on constructed curves: the answer is known ------------------------------------------------

BASE_ACC = 0.40
FULL_ENDS = [0.600, 0.605, 0.595, 0.603, 0.597]  # the full run gains 20 points on every seed, small spread
SPREAD = [0.002, -0.002, 0.001, -0.001, 0.0]  # +- 0.2 points of seed noise on the tier run's difference


def _equivalence_runs(full_ends, run_ends, run_steps=45, full_steps=100, base_acc=BASE_ACC):
    """A full run and a tier run, one final checkpoint per seed (seeds 0..n-1), accuracies to 0.1 point
    (1000 samples per example); tier "2" sits 20 points below tier "1" on both sides and for the base."""
    def tiers(acc):
        return {"1": acc, "2": acc - 0.2}
    rows = []
    for seed, (f, r) in enumerate(zip(full_ends, run_ends)):
        rows += [("full", seed, full_steps, tiers(f)), ("tier_low", seed, run_steps, tiers(r))]
    base = _outcomes([("base", seed, 0, tiers(base_acc)) for seed in range(len(full_ends))], samples=1000)
    return _outcomes(rows, samples=1000), base.drop("strategy", "step")


def test_a_run_one_point_below_the_full_run_over_five_seeds_is_equivalent_at_margin_5():
    runs, base = _equivalence_runs(FULL_ENDS, [f - 0.01 + e for f, e in zip(FULL_ENDS, SPREAD)])
    rows = _rows(catch_up_table(runs, base=base, margin=5))
    assert set(rows) == {"overall", "1", "2"}
    for r in rows.values():  # overall and per tier alike
        assert r["difference"] == pytest.approx(-1.0) and -2 < r["difference_ci_low"] < r["difference_ci_high"] < 0
        assert r["equivalent"] == "yes" and r["margin"] == 5.0 and r["n_seeds"] == 5
        assert r["full_gain"] == pytest.approx(20.0) and r["full_gain_ci_low"] > 0
        assert r["share_pct"] == 45.0  # its own 45 steps over the full run's 100


def test_a_run_seven_points_below_is_not_equivalent():
    runs, base = _equivalence_runs(FULL_ENDS, [f - 0.07 + e for f, e in zip(FULL_ENDS, SPREAD)])
    rows = _rows(catch_up_table(runs, base=base, margin=5))
    assert all(r["difference"] == pytest.approx(-7.0) and r["difference_ci_high"] < -5 for r in rows.values())
    assert all(r["equivalent"] == "no" for r in rows.values())
    assert all(r["equivalent"] == "yes" for r in _rows(catch_up_table(runs, base=base, margin=10)).values())
    # the secondary measure agrees here: no checkpoint, the base model (step 0) included, reaches 60 %
    assert all(r["first_crossing_share"] is None for r in rows.values())


def test_three_noisy_seeds_do_not_show_equivalence():
    # differences -1, -9, +7 points: mean -1, but the 90 % interval spans far beyond +-5
    full = FULL_ENDS[:3]
    runs, base = _equivalence_runs(full, [f + d for f, d in zip(full, (-0.01, -0.09, 0.07))])
    rows = _rows(catch_up_table(runs, base=base, margin=5))
    one = rows["1"]
    assert one["difference"] == pytest.approx(-1.0) and one["interval"] == "paired t over 3 seeds, 90 %"
    assert one["difference_ci_low"] < -5 and one["difference_ci_high"] > 5
    assert all(r["equivalent"] == NOT_SHOWN for r in rows.values())


def test_a_full_run_that_does_not_gain_over_the_base_gives_no_share_and_no_verdict():
    # ends exactly at the base model: mean gain 0
    flat = [BASE_ACC] * 5
    runs, base = _equivalence_runs(flat, [BASE_ACC - 0.01 + e for e in SPREAD])
    rows = _rows(catch_up_table(runs, base=base))
    assert all(r["full_gain"] == pytest.approx(0.0) for r in rows.values())
    assert all(r["equivalent"] == NO_GAIN and r["share_pct"] is None for r in rows.values())
    assert all(r["first_crossing_share"] is None for r in rows.values())
    # a positive mean gain whose interval reaches 0 (+3, -1, +2 points) does not count as a gain either
    noisy = [BASE_ACC + g for g in (0.03, -0.01, 0.02)]
    runs, base = _equivalence_runs(noisy, noisy)
    one = _rows(catch_up_table(runs, base=base))["1"]
    assert one["full_gain"] == pytest.approx(4 / 3) and one["full_gain_ci_low"] < 0
    assert one["equivalent"] == NO_GAIN and one["share_pct"] is None
    assert one["difference"] == pytest.approx(0.0)  # the facts stay: equal to the full run, which taught nothing


def test_the_share_is_the_ratio_of_the_runs_steps():
    runs, base = _equivalence_runs(FULL_ENDS, FULL_ENDS, run_steps=30, full_steps=80)
    rows = _rows(catch_up_table(runs, base=base))
    assert all(r["steps"] == 30 and r["full_steps"] == 80 for r in rows.values())
    assert all(r["share_pct"] == pytest.approx(100 * 30 / 80) for r in rows.values())
    assert all(r["equivalent"] == "yes" for r in rows.values())  # identical accuracies


def test_the_verdict_reads_the_interval_against_the_margin():
    assert equivalence_verdict(-5.0, 5.0, 5.0) == "yes"  # the margin's ends belong to it
    assert equivalence_verdict(-5.1, 0.0, 5.0) == NOT_SHOWN  # straddles an end
    assert equivalence_verdict(-9.0, -5.1, 5.0) == "no" and equivalence_verdict(5.1, 9.0, 5.0) == "no"
    assert equivalence_verdict(math.nan, math.nan, 5.0) == NOT_SHOWN  # no interval


@pytest.mark.parametrize("margin", [0, -1, math.nan, math.inf])
def test_a_margin_that_is_not_a_positive_finite_number_is_refused(margin):
    with pytest.raises(ValueError, match="report.equivalence_margin"):
        catch_up_table(_runs(), margin=margin)
