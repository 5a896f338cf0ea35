"""A subset with nothing to learn stops its train job before the first GRPO step, through Snakemake's CLI."""

from __future__ import annotations

import polars as pl

from tests.support import snakemake, write_config


def test_a_subset_without_a_learnable_example_stops_its_train_job_before_a_step(smoke_copy, smoke_config):
    cfg = smoke_config
    cfg["selection"]["allow_unlearnable"] = []
    write_config(smoke_copy, cfg)
    subset = smoke_copy / "results/subsets/tiny/swaps/easy/seed0.parquet"
    # solved every time, on a pool that solves nearly everything: a posterior close to 1
    pl.read_parquet(subset).with_columns(pass_rate=pl.lit(1.0), n_correct=pl.col("k"), posterior_a=pl.lit(100.0),
                                         posterior_b=pl.lit(0.01)).write_parquet(subset)
    res = snakemake(smoke_copy, "--cores", "1", "results/train/tiny/swaps/easy/seed0/steps.parquet", forked=True)
    assert res.returncode != 0
    log = (smoke_copy / "logs/train/tiny/swaps/easy/seed0.log").read_text()
    assert ("UnlearnableSubsetError: subset 'easy' has expected share of mixed groups 0.00 at G=4 from the "
            "posterior, below 0.05 (0 of 4 examples have 0 < pass rate < 1; pass rates in {1})") in log
    assert "selection.allow_unlearnable: [easy]" in log
    assert "training examples" not in log  # stopped before the trainer was built

    cfg["selection"]["allow_unlearnable"] = ["easy"]  # accepted by name, it trains
    write_config(smoke_copy, cfg)
    res = snakemake(smoke_copy, "--cores", "1", "results/train/tiny/swaps/easy/seed0/steps.parquet", forked=True)
    assert res.returncode == 0, res.stderr[-3000:]
    log = (smoke_copy / "logs/train/tiny/swaps/easy/seed0.log").read_text()
    assert "accepted by selection.allow_unlearnable (easy)" in log
