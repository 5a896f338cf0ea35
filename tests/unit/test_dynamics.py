"""Training dynamics (hardex.report.dynamics): each recorded quantity per step over seeds, and the probe's predicted
mixed share at step 0."""

from __future__ import annotations

import polars as pl
import pytest

from hardex.report.dynamics import dynamics_by_step, dynamics_table, recorded


def steps_of(**extra) -> pl.DataFrame:
    """Two seeds of hard over 3 steps, one seed of full_random_reward."""
    rows = [{"model": "m", "task": "t", "strategy": s, "seed": seed, "step": step, "reward_mean": 0.1 * step + seed,
             "frac_zero_std": 0.25 * seed, "completion_length": 10.0 + step, **extra}
            for s, seeds in (("hard", (0, 1)), ("full_random_reward", (0,))) for seed in seeds for step in (1, 2, 3)]
    return pl.DataFrame(rows)


def test_each_quantity_is_its_mean_over_the_seeds_with_their_range():
    long = dynamics_by_step(steps_of(kl=0.0))
    assert set(long["quantity"]) == {"reward_mean", "mixed_pct", "completion_length"}  # no KL: it is 0 everywhere
    mixed = long.filter((pl.col("strategy") == "hard") & (pl.col("quantity") == "mixed_pct") & (pl.col("step") == 2))
    assert mixed.row(0, named=True) == {"model": "m", "task": "t", "strategy": "hard", "step": 2,
                                         "quantity": "mixed_pct", "n_seeds": 2, "mean": pytest.approx(87.5),
                                         "low": 75.0, "high": 100.0}
    assert long["strategy"].unique(maintain_order=True).to_list() == ["hard", "full_random_reward"]


def test_the_table_has_a_column_per_recorded_quantity_and_the_probes_prediction_at_step_0():
    predicted = pl.DataFrame({"model": "m", "task": "t", "strategy": ["pool", "hard", "easy"],
                              "expected_learnable_pct_posterior": [30.0, 12.0, 80.0]})
    table = dynamics_table(steps_of(frac_truncated=0.5, kl=0.02), predicted)
    assert table.columns == ["model", "task", "strategy", "step", "n_seeds", "reward_mean", "mixed_pct",
                             "completion_length", "truncated_pct", "kl"]
    hard = table.filter(pl.col("strategy") == "hard")
    assert hard["step"].to_list() == [0, 1, 2, 3]  # the prediction only for a subset that trained (not pool, easy)
    assert hard.row(0, named=True)["mixed_pct"] == 12.0 and hard.row(0, named=True)["n_seeds"] is None
    assert hard["truncated_pct"].to_list()[1:] == [50.0] * 3 and hard["reward_mean"][1] == pytest.approx(0.6)
    assert recorded(steps_of()) == ["reward_mean", "mixed", "completion_length"]
