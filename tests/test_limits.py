"""Paper 2's catch-up measure on synthetic curves: the step at which a lower-tier run first matches
the full run's final accuracy, overall and across tiers."""

from __future__ import annotations

import polars as pl
import pytest

from hardex.limits import LimitsError, catch_up, catch_up_by_tier, mean_curve, steps_to_match

STEPS = [0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]


def curve(acc, steps=STEPS, **cols) -> pl.DataFrame:
    return pl.DataFrame({"step": steps, "accuracy": acc, **{k: [v] * len(steps) for k, v in cols.items()}})


def test_first_step_at_or_above_the_target():
    acc = [0.2, 0.4, 0.5, 0.61, 0.59, 0.62, 0.6, 0.6, 0.6, 0.6, 0.6]
    assert steps_to_match(STEPS, acc, 0.6) == 300
    assert steps_to_match(STEPS, acc, 0.6, sustained=True) == 500  # 400 dips below again
    assert steps_to_match(STEPS, acc, 0.63) is None
    assert steps_to_match(STEPS, acc, 0.63, tolerance=0.02) == 300
    assert steps_to_match(STEPS[::-1], acc[::-1], 0.6) == 300  # order of the points does not matter


def test_exact_equality_counts_as_a_match():
    assert steps_to_match([100, 200], [0.1 + 0.2, 0.5], 0.3) == 100  # 0.30000000000000004 vs 0.3


def test_catch_up_share_is_the_papers_45_percent():
    full = curve([0.30, 0.40, 0.50, 0.55, 0.58, 0.60, 0.62, 0.63, 0.64, 0.65, 0.65])
    low = curve([0.30, 0.45, 0.55, 0.60, 0.64, 0.65, 0.66, 0.66, 0.65, 0.66, 0.66])
    res = catch_up(low, full)
    assert res == {"target": 0.65, "full_steps": 1000, "match_step": 500, "share": 0.5}


def test_never_matching_gives_none():
    full = curve([0.3] + [0.7] * 10)
    low = curve([0.3] + [0.5] * 10)
    assert catch_up(low, full) == {"target": 0.7, "full_steps": 1000, "match_step": None, "share": None}


def test_seeds_are_averaged_before_comparing():
    full = pl.concat([curve([0.3, 0.6], [0, 100], seed=0), curve([0.3, 0.8], [0, 100], seed=1)])  # mean 0.7
    low = pl.concat([curve([0.3, 0.9, 0.7], [0, 50, 100], seed=0), curve([0.3, 0.4, 0.7], [0, 50, 100], seed=1)])
    assert mean_curve(low)["accuracy"].to_list() == pytest.approx([0.3, 0.65, 0.7])
    assert catch_up(low, full)["match_step"] == 100  # seed 0 alone would have matched at 50


def test_by_tier_and_across_tiers():
    # full run: final accuracy 0.9 on tier 1, 0.5 on tier 3
    full = pl.concat([curve([0.5, 0.8, 0.9], [0, 100, 200], tier="1"), curve([0.2, 0.4, 0.5], [0, 100, 200], tier="3")])
    low = pl.concat(
        [
            curve([0.5, 0.9, 0.85, 0.95], [0, 50, 100, 200], tier="1"),  # matches tier 1 at 50
            curve([0.2, 0.3, 0.5, 0.5], [0, 50, 100, 200], tier="3"),  # matches tier 3 at 100
        ]
    )
    table = catch_up_by_tier(low, full)
    rows = {r["tier"]: r for r in table.iter_rows(named=True)}
    assert table["tier"].to_list() == ["1", "3", "all"]
    assert rows["1"]["target"] == pytest.approx(0.9) and rows["1"]["match_step"] == 50
    assert rows["3"]["match_step"] == 100
    assert rows["all"]["match_step"] == 200  # at 100 tier 1 has dipped to 0.85
    assert rows["all"]["share"] == 1.0 and rows["3"]["share"] == 0.5
    sustained = {r["tier"]: r["match_step"] for r in catch_up_by_tier(low, full, sustained=True).iter_rows(named=True)}
    assert sustained == {"1": 200, "3": 100, "all": 200}
    loose = catch_up_by_tier(low, full, tolerance=0.05).filter(pl.col("tier") == "all")
    assert loose["match_step"][0] == 100


def test_tier_missing_from_the_lower_tier_run_never_matches():
    full = pl.concat([curve([0.5, 0.9], [0, 100], tier="1"), curve([0.1, 0.2], [0, 100], tier="5")])
    low = curve([0.5, 0.95], [0, 100], tier="1")
    table = catch_up_by_tier(low, full)
    assert table.filter(pl.col("tier") == "5")["match_step"][0] is None
    assert table.filter(pl.col("tier") == "all")["match_step"][0] is None


def test_bad_curves():
    with pytest.raises(LimitsError, match="no column"):
        catch_up(pl.DataFrame({"step": [0]}), curve([0.1, 0.2], [0, 100]))
    with pytest.raises(LimitsError, match="no training checkpoint"):
        catch_up(curve([0.1], [0]), curve([0.1], [0]))
    with pytest.raises(LimitsError, match="2 steps but 1"):
        steps_to_match([0, 1], [0.1], 0.1)


def _outcomes(rows) -> pl.DataFrame:
    """Per-example outcomes (10 examples per tier) from (strategy, seed, step, {tier: accuracy})."""
    out = []
    for strategy, seed, step, accs in rows:
        for tier, acc in accs.items():
            for i in range(10):
                out.append({"model": "m", "task": "t", "benchmark": "t/test", "strategy": strategy, "seed": seed,
                            "step": step, "id": f"{tier}-{i}", "tier": tier, "n": 1, "n_correct": int(i < 10 * acc)})
    return pl.DataFrame(out)


def test_catch_up_table_from_evaluation_outcomes():
    from hardex.limits import catch_up_table

    base = _outcomes([("base", 0, 0, {"1": 0.2, "2": 0.0})]).drop("strategy", "seed", "step")
    runs = _outcomes([
        ("full", 0, 50, {"1": 0.5, "2": 0.2}), ("full", 0, 100, {"1": 0.6, "2": 0.4}),
        ("full", 1, 50, {"1": 0.5, "2": 0.2}), ("full", 1, 100, {"1": 0.6, "2": 0.4}),
        ("tier_low", 0, 50, {"1": 0.7, "2": 0.1}), ("tier_low", 0, 100, {"1": 0.7, "2": 0.4}),
        ("hard", 0, 50, {"1": 0.1, "2": 0.1}), ("hard", 0, 100, {"1": 0.2, "2": 0.3}),
    ])
    t = catch_up_table(runs, base)
    low = {r["tier"]: r for r in t.filter(pl.col("strategy") == "tier_low").iter_rows(named=True)}
    assert low["1"]["match_step"] == 50 and low["1"]["share_pct"] == 50.0 and low["1"]["target_accuracy"] == 60.0
    assert low["2"]["match_step"] == 100 and low["all"]["match_step"] == 100  # every tier at once
    assert low["overall"]["target_accuracy"] == 50.0 and low["overall"]["match_step"] == 100  # 0.40 at 50, 0.55 at 100
    hard = {r["tier"]: r for r in t.filter(pl.col("strategy") == "hard").iter_rows(named=True)}
    assert hard["all"]["match_step"] is None and hard["overall"]["share_pct"] is None  # never catches up
    assert set(t["strategy"]) == {"tier_low", "hard"} and (t["full_steps"] == 100).all()
    assert catch_up_table(runs.filter(pl.col("strategy") != "full"), base).height == 0  # nothing to catch up with


def test_catch_up_table_counts_the_base_model_as_step_zero():
    from hardex.limits import catch_up_table

    base = _outcomes([("base", 0, 0, {"1": 0.9})]).drop("strategy", "seed", "step")
    runs = _outcomes([("full", 0, 100, {"1": 0.8}), ("easy", 0, 100, {"1": 0.5})])
    t = catch_up_table(runs, base)
    assert t.filter(pl.col("tier") == "overall")["match_step"].to_list() == [0]  # already there before training
