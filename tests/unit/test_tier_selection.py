"""Tier strategies (paper 2): tier_<name> is the pool's examples of one tier set, tier_<name>_random its
size-matched random control; both come from the probe table's `tier` column."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from hardex.selection import SelectionError, is_strategy, parse_tier_strategy, select, tier_values


@pytest.fixture
def probe() -> pl.DataFrame:
    rng = np.random.default_rng(1)
    n = 200
    tiers = rng.integers(1, 6, n)  # MATH levels 1-5
    tier = [str(t) for t in tiers]
    tier[7] = None  # a "Level ?" problem
    return pl.DataFrame(
        {
            "id": [f"m{i}" for i in range(n)],
            "k": [4] * n,
            "n_correct": rng.integers(0, 5, n),
            "greedy_correct": rng.uniform(0, 1, n) < 0.5,
            "tier": tier,
        }
    ).with_columns((pl.col("n_correct") / 4).alias("pass_rate"))


def test_parse_tier_strategy_names():
    assert parse_tier_strategy("tier_low") == ("low", False)
    assert parse_tier_strategy("tier_low_random") == ("low", True)
    assert parse_tier_strategy("tier_L13") == ("L13", False)
    assert parse_tier_strategy("hard") is None and parse_tier_strategy("tier_") is None
    assert parse_tier_strategy("tier_lo_w") is None  # tier names have no underscore
    assert is_strategy("tier_high_random") and is_strategy("full") and not is_strategy("tiers")


def test_tier_values_one_list_or_per_task():
    assert tier_values({"low": [1, 2, 3]}, "tier_low", "math") == ["1", "2", "3"]
    assert tier_values({"low": [1, 2, 3]}, "tier_low_random", "gsm8k") == ["1", "2", "3"]
    per_task = {"low": {"math": [1, 2, 3], "gsm8k": [2, 3]}}
    assert tier_values(per_task, "tier_low", "gsm8k") == ["2", "3"]
    assert tier_values(per_task, "hard", "gsm8k") is None
    with pytest.raises(SelectionError, match="no tier 'high' \\(low\\)"):
        tier_values(per_task, "tier_high", "math")
    with pytest.raises(SelectionError, match="no values for task 'swaps'"):
        tier_values(per_task, "tier_low", "swaps")


def test_tier_subset_is_exactly_the_tier(probe):
    sub = select(probe, "tier_low", 0.1, seed=0, in_tiers=[1, 2, 3])
    want = probe.filter(pl.col("tier").is_in(["1", "2", "3"]))
    assert sorted(sub["id"]) == sorted(want["id"])  # the budget p plays no part
    assert "m7" not in set(sub["id"])  # no tier, no tier subset
    assert sub["rank"].to_list() == list(range(sub.height))
    assert sub.columns == ["id", "pass_rate", "rank"]


def test_random_control_is_size_matched_from_the_whole_pool(probe):
    sub = select(probe, "tier_low", 0.1, 0, in_tiers=["1", "2", "3"])
    control = select(probe, "tier_low_random", 0.1, 0, in_tiers=["1", "2", "3"])
    assert control.height == sub.height and control["id"].n_unique() == control.height
    tiers = dict(zip(probe["id"], probe["tier"]))
    assert {tiers[i] for i in control["id"]} - {"1", "2", "3"}  # draws higher tiers too
    assert select(probe, "tier_low_random", 0.1, 0, in_tiers=[1, 2, 3]).equals(control)  # ints or strings
    assert not select(probe, "tier_low_random", 0.1, 1, in_tiers=[1, 2, 3]).equals(control)


@pytest.mark.parametrize("strategy", ["tier_low", "tier_low_random"])
def test_deterministic_under_a_seed(probe, strategy):
    assert select(probe, strategy, 0.1, 3, in_tiers=[4, 5]).equals(select(probe, strategy, 0.1, 3, in_tiers=[4, 5]))


def test_errors_name_the_problem(probe):
    with pytest.raises(SelectionError, match="no tier values given"):
        select(probe, "tier_low", 0.1, 0)
    with pytest.raises(SelectionError, match="no pool example has a tier among \\['9'\\]"):
        select(probe, "tier_low", 0.1, 0, in_tiers=[9])
    with pytest.raises(SelectionError, match="this pool has none"):
        select(probe.with_columns(pl.lit(None, pl.Utf8).alias("tier")), "tier_low", 0.1, 0, in_tiers=[1])
    with pytest.raises(SelectionError, match="this pool has none"):
        select(probe.drop("tier"), "tier_low", 0.1, 0, in_tiers=[1])
    with pytest.raises(SelectionError, match="unknown strategy 'tier-low'"):
        select(probe, "tier-low", 0.1, 0, in_tiers=[1])


def test_cpu_tiers_splits_the_arith_pool_by_its_levels_and_each_tier_trains_its_own_epoch():
    """experiments/cpu_tiers.yaml's tiers on the arith family's own levels (the operands' digits): the
    tier subsets partition the pool by level, and one epoch of a tier is a fraction of the full run's steps."""
    from pathlib import Path

    import yaml

    from hardex.config import check_config
    from hardex.schedule import run_steps
    from hardex.tasks import get_task

    cfg = check_config(yaml.safe_load((Path(__file__).parents[2] / "experiments/cpu_tiers.yaml").read_text()))
    pool = get_task("arith").load_split({"name": "pool", "n": 240, "seed": 1, "difficulty": [1, 8]})
    # the probe table's tier column is the pool's level as text (hardex.probing)
    probe = pool.select("id", pl.col("tier").cast(pl.Utf8), pl.lit(0.5).alias("pass_rate"), pl.lit(8).alias("k"))
    levels = dict(zip(probe["id"], probe["tier"].cast(pl.Int64)))
    g, full_steps = cfg["grpo"], run_steps(cfg["grpo"], pool.height)
    seen: list[str] = []
    for strategy in [s for s in cfg["selection"]["strategies"] if s != "full"]:
        values = tier_values(cfg["selection"]["tiers"], strategy, "arith")
        ids = select(probe, strategy, cfg["selection"]["budget"], 0, in_tiers=values)["id"].to_list()
        assert ids and {levels[i] for i in ids} == {int(v) for v in values}  # every level of the tier, no other
        assert run_steps(g, len(ids)) < full_steps  # an epoch of a tier is shorter than the full pool's
        seen += ids
    assert sorted(seen) == sorted(probe["id"])  # low, mid and high partition the pool
    assert full_steps == 30  # 240 examples, 8 prompts a step, one epoch
