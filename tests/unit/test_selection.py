"""Selection strategies: exact sizes, disjointness where it must hold, determinism under a seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import polars as pl
import pytest

from hardex.selection import STRATEGIES, SelectionError, budget_size, select


@pytest.fixture
def probe() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    n = 137
    k = 5
    correct = rng.binomial(k, rng.uniform(0, 1, n))  # many ties, as with the paper's K = 5
    return pl.DataFrame(
        {
            "id": [f"x{i}" for i in range(n)],
            "k": [k] * n,
            "n_correct": correct,
            "pass_rate": correct / k,
            "greedy_correct": rng.uniform(0, 1, n) < correct / k,
        }
    )


FILTER_OPTIONS = {"band": (0.1, 0.6), "group_size": 4}  # read by band and learnable only


@pytest.mark.parametrize("strategy", ["hard", "easy", "medium", "random", "band", "learnable"])
def test_budget_strategies_take_exactly_floor_pn(probe, strategy):
    sub = select(probe, strategy, 0.1, seed=0, **FILTER_OPTIONS)
    assert sub.height == 13 == budget_size(137, 0.1)
    assert sub["id"].n_unique() == 13
    assert sub["rank"].to_list() == list(range(13))


def test_hard_and_easy_are_the_extremes(probe):
    hard, easy = select(probe, "hard", 0.1, 0), select(probe, "easy", 0.1, 0)
    rest = probe.filter(~pl.col("id").is_in(hard["id"].to_list()))
    assert hard["pass_rate"].max() <= rest["pass_rate"].min()
    rest = probe.filter(~pl.col("id").is_in(easy["id"].to_list()))
    assert easy["pass_rate"].min() >= rest["pass_rate"].max()
    assert not set(hard["id"]) & set(easy["id"])


def test_medium_is_centred_on_the_median(probe):
    med = select(probe, "medium", 0.1, 0)
    assert abs(med["pass_rate"].median() - probe["pass_rate"].median()) <= 0.2
    assert not set(med["id"]) & set(select(probe, "hard", 0.1, 0)["id"])


def test_ties_are_broken_by_seed_not_dataset_order(probe):
    a, b = select(probe, "hard", 0.1, 0), select(probe, "hard", 0.1, 1)
    assert a["pass_rate"].sort().to_list() == b["pass_rate"].sort().to_list()  # same difficulty profile
    assert a["id"].to_list() != b["id"].to_list()  # different members among the tied
    first = probe.sort("pass_rate", maintain_order=True).head(13)["id"].to_list()
    assert a["id"].to_list() != first


SELECT_IN_A_FRESH_PROCESS = """
import json, sys
import polars as pl
from hardex.selection import STRATEGIES, select
probe = pl.read_parquet(sys.argv[1])
options = {"band": (0.1, 0.6), "group_size": 4}
print(json.dumps({s: select(probe, s, 0.1, 7, **options)["id"].to_list() for s in STRATEGIES}))
"""


def test_deterministic_under_a_seed_in_other_processes(probe, tmp_path):
    """The same seed picks the same examples in another process, with another string-hash seed: what a rerun of a
    select job, or a machine of a later sitting, makes of the same probe (two calls in one process share its
    hash seed and any state a module keeps)."""
    probe.write_parquet(tmp_path / "probe.parquet")
    here = {s: select(probe, s, 0.1, 7, **FILTER_OPTIONS)["id"].to_list() for s in STRATEGIES}
    hash_seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"  # not this process's
    res = subprocess.run([sys.executable, "-c", SELECT_IN_A_FRESH_PROCESS, str(tmp_path / "probe.parquet")],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONHASHSEED": hash_seed})
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout) == here
    assert len({tuple(ids) for ids in here.values()}) > 1  # the strategies differ: the comparison can fail


def test_band_takes_the_window_then_the_nearest_outside(probe):
    inside = probe.filter(pl.col("pass_rate").is_between(0.2, 0.4))
    few = select(probe, "band", 0.1, 0, band=(0.2, 0.4))
    assert inside.height >= 13 and few["pass_rate"].is_between(0.2, 0.4).all()
    assert select(probe, "band", 0.1, 1, band=(0.2, 0.4))["id"].to_list() != few["id"].to_list()  # seeded ties
    narrow = select(probe, "band", 0.5, 0, band=(0.4, 0.4))  # 68 asked, fewer inside: then by distance
    n_inside = probe.filter(pl.col("pass_rate") == 0.4).height
    assert narrow.height == 68 and narrow.head(n_inside)["pass_rate"].eq(0.4).all()
    distance = (narrow["pass_rate"] - 0.4).abs()
    assert distance.to_list() == sorted(distance.to_list())


def test_learnable_takes_the_highest_expected_mixed_share_for_the_group_size(probe):
    from hardex.metrics import expected_mixed

    sub = select(probe, "learnable", 0.1, 0, group_size=4)
    score = {i: expected_mixed(c, 5, 4) for i, c in zip(probe["id"], probe["n_correct"])}
    rest = [score[i] for i in probe["id"] if i not in set(sub["id"])]
    assert min(score[i] for i in sub["id"]) >= max(rest)
    # with K = 5 >= G = 4, the unbiased estimate: 0 unless the probe saw both outcomes at least twice
    assert {c for c in sub["pass_rate"] * 5} <= {2.0, 3.0}


@pytest.mark.parametrize("band,message", [((0.6, 0.1), "reversed"), ((-0.1, 0.5), "outside"),
                                          ((0.2, 1.5), "outside")])
def test_bad_band_windows_are_refused(probe, band, message):
    with pytest.raises(SelectionError, match=message):
        select(probe, "band", 0.1, 0, band=band)


def test_base_wrong_right_are_size_matched_and_disjoint(probe):
    wrong, right = select(probe, "base_wrong", 0.1, 0), select(probe, "base_right", 0.1, 0)
    control = select(probe, "matched_random", 0.1, 0)
    n_wrong = int((~probe["greedy_correct"]).sum())
    assert wrong.height == right.height == control.height == min(n_wrong, probe.height - n_wrong)
    assert not set(wrong["id"]) & set(right["id"])
    g = dict(zip(probe["id"], probe["greedy_correct"]))
    assert not any(g[i] for i in wrong["id"]) and all(g[i] for i in right["id"])


def test_full_is_the_whole_pool(probe):
    assert sorted(select(probe, "full", 0.1, 0)["id"]) == sorted(probe["id"])


def test_a_budget_that_selects_nothing_is_an_error(probe):
    with pytest.raises(SelectionError, match="selects no example"):
        select(probe.head(5), "hard", 0.1, 0)


def test_unknown_strategy(probe):
    with pytest.raises(SelectionError, match="unknown strategy 'hardest'"):
        select(probe, "hardest", 0.1, 0)


def test_each_strategy_gets_only_the_settings_it_reads(smoke_config):
    """The select rule's params beyond the budget and seed (settings.select_settings, from selection.STRATEGY_SETTINGS):
    band its window, learnable the model's group size, a tier strategy its tier's values on the task, the others
    none, so that editing one setting reruns only the strategies that read it."""
    import copy

    from hardex.config import check_config
    from hardex.selection import STRATEGY_SETTINGS, TIER_SETTINGS
    from hardex.settings import grpo_settings, select_settings

    cfg = copy.deepcopy(smoke_config)
    cfg["selection"]["tiers"] = {"low": [1, 2]}
    cfg["selection"]["band"] = [0.2, 0.7]
    cfg = check_config(cfg)
    model, task = next(iter(cfg["models"])), next(iter(cfg["tasks"]))
    got = {s: select_settings(cfg, model, task, s) for s in (*STRATEGIES, "tier_low", "tier_low_random")}
    none = {"tiers": None, "band": None, "group_size": None}
    assert set(STRATEGY_SETTINGS) <= set(STRATEGIES) and set(TIER_SETTINGS) <= set(none)
    assert got["band"] == none | {"band": [0.2, 0.7]}
    assert got["learnable"] == none | {"group_size": grpo_settings(cfg, model)["num_generations"]}
    assert got["tier_low"] == got["tier_low_random"] == none | {"tiers": ["1", "2"]}
    assert all(got[s] == none for s in STRATEGIES if s not in ("band", "learnable"))
