"""A reasoning-gym task through every rule, from its generated splits to the report and the survey, on Snakemake's
own CLI: a mixed pool of two tasks at two curriculum levels, a test split and an ood split at harder settings,
the tiny built model probing, training (with the random-reward control) and being evaluated on them."""

from __future__ import annotations

import json

import polars as pl

from hardex.io import read_parquet_metadata
from tests.support import snakemake, write_config

DATASET = {
    "family": "reasoning_gym",
    "task": {"chain_sum": 1, "gcd": 1},
    "config": {"chain_sum": {"allow_negation": False}},
    "splits": {
        "pool": {"n": 24, "seed": 1, "tiers": [0, 1]},
        "test": {"n": 8, "seed": 2},
        "ood": {"n": 6, "seed": 3, "config": {"chain_sum": {"min_terms": 4, "max_terms": 5}}},
    },
}


def test_a_mixed_reasoning_gym_pool_runs_from_its_splits_to_the_report_and_the_survey(tmp_path, smoke_config):
    cfg = smoke_config
    cfg["datasets"]["rg"] = DATASET
    cfg["tasks"] = {"rg": {"pool": "rg/pool", "benchmarks": ["rg/test", "rg/ood"], "scoring": "flexible"}}
    cfg["selection"].update(budget=0.25, strategies=["hard", "random"], online_strategies=[],
                            controls={"random_reward": ["hard"]}, allow_unlearnable=["hard", "random"])
    cfg["evaluation"]["overrides"] = {}
    cfg["grpo"].update(max_steps=2, save_steps=2)
    config = write_config(tmp_path, cfg)
    res = snakemake(tmp_path, "--cores", "2", "all", "survey", configfile=config, forked=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-4000:]

    pool = pl.read_parquet(tmp_path / "results/data/rg/pool.parquet")
    assert sorted(set(pool["tier"])) == ["chain_sum/0", "chain_sum/1", "gcd/0", "gcd/1"]
    assert pool["rg_task"].value_counts().sort("rg_task").rows() == [("chain_sum", 12), ("gcd", 12)]
    ood = pl.read_parquet(tmp_path / "results/data/rg/ood.parquet")
    terms = {json.loads(a)["metadata"]["num_terms"] for a, t in zip(ood["answer"], ood["rg_task"]) if t == "chain_sum"}
    assert terms and min(terms) >= 4  # the ood split's own settings
    # every run and the base model evaluated on both benchmarks, by the tasks' own verifiers
    for run in ("hard", "random", "hard_random_reward"):
        ev = pl.read_parquet(tmp_path / f"results/eval/tiny/rg/{run}/seed0.parquet")
        assert set(ev["benchmark"]) == {"rg/test", "rg/ood"}
    # the report reads accuracy per task: a mixed pool's tier is its task
    tiers = (tmp_path / "results/tables/tier_accuracy.md").read_text()
    assert "chain_sum" in tiers and "gcd" in tiers
    assert (tmp_path / "results/tables/headline.md").exists()
    survey = pl.read_csv(tmp_path / "results/tables/survey.csv")
    assert set(survey["tier"].cast(pl.Utf8)) == {"all", "chain_sum/0", "chain_sum/1", "gcd/0", "gcd/1"}
    assert survey.filter(pl.col("tier") == "all")["n"].to_list() == [24]
    assert (tmp_path / "results/figures/survey.png").stat().st_size > 10_000
    # the probe's provenance names the scorer with reasoning-gym's version
    meta = read_parquet_metadata(tmp_path / "results/probe/tiny/rg.parquet", "hardex.probe")
    assert meta["scorer"] == ["reasoning_gym", "flexible", "0.1.25"]
