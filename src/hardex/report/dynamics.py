"""Training dynamics: what happened during GRPO training, step by step, from each run's steps.parquet (the
training_dynamics table and figure).

Per model x task x strategy and step, over the seeds that reached it: the mean reward, the share of groups whose
rewards mixed (the only ones with a gradient), the mean completion length, the share of completions cut at the
length limit (TRL's clipped ratio; runs trained before it was recorded lack it) and, where any run trained with a
KL penalty, the KL to the reference. Beside them, at step 0, the share of mixed groups the probe predicted for
each subset at the base model: where a run's line starts far from it, training met groups other than those the
probe saw.
"""

from __future__ import annotations

import polars as pl

from hardex.selection import strategy_sort_key

#: steps.parquet column -> (the table's column, the figure's panel title, the scale it is shown in)
QUANTITIES = {
    "reward_mean": ("reward_mean", "mean reward", 1.0),
    "mixed": ("mixed_pct", "groups with mixed rewards (%)", 100.0),
    "completion_length": ("completion_length", "completion length (tokens)", 1.0),
    "frac_truncated": ("truncated_pct", "completions cut at the length limit (%)", 100.0),
    "kl": ("kl", "KL to the reference", 1.0),
}
KEYS = ["model", "task", "strategy", "step"]


def recorded(steps: pl.DataFrame) -> list[str]:
    """The quantities the runs recorded: KL only where some run's is nonzero (beta > 0)."""
    steps = _with_mixed(steps)
    return [c for c in QUANTITIES if c in steps.columns and steps[c].is_not_null().any()
            and (c != "kl" or (steps["kl"].fill_null(0).abs() > 0).any())]


def _with_mixed(steps: pl.DataFrame) -> pl.DataFrame:
    if "frac_zero_std" not in steps.columns:
        return steps
    return steps.with_columns((1 - pl.col("frac_zero_std")).alias("mixed"))


def dynamics_by_step(steps: pl.DataFrame) -> pl.DataFrame:
    """model, task, strategy, step, quantity (the table's column name), n_seeds, mean, low, high: each recorded
    quantity per step in its shown scale, the mean over the seeds that reached the step and their range."""
    steps = _with_mixed(steps)
    parts = []
    for source in recorded(steps):
        name, _, scale = QUANTITIES[source]
        value = scale * pl.col(source)
        parts.append(steps.group_by(KEYS).agg(pl.lit(name).alias("quantity"),
                                              pl.col("seed").n_unique().alias("n_seeds"),
                                              value.mean().alias("mean"), value.min().alias("low"),
                                              value.max().alias("high")))
    schema = {"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8, "step": pl.Int64, "quantity": pl.Utf8,
              "n_seeds": pl.UInt32, "mean": pl.Float64, "low": pl.Float64, "high": pl.Float64}
    if not parts:
        return pl.DataFrame(schema=schema)
    return _in_strategy_order(pl.concat(parts, how="vertical_relaxed"), "step", "quantity")


def dynamics_table(steps: pl.DataFrame, predicted: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per model x task x strategy x step, each recorded quantity's mean over seeds in a column of its
    own (QUANTITIES' names); with `predicted` (the subset_pass_rates table), a row at step 0 per subset strategy
    that trained, its mixed_pct the probe's prediction (expected_learnable_pct_posterior) and nothing else."""
    long = dynamics_by_step(steps)
    if long.height == 0:
        return pl.DataFrame(schema={k: pl.Utf8 for k in KEYS[:3]} | {"step": pl.Int64, "n_seeds": pl.Int64})
    wide = long.pivot(on="quantity", index=[*KEYS, "n_seeds"], values="mean", aggregate_function="first")
    names = [QUANTITIES[c][0] for c in QUANTITIES if QUANTITIES[c][0] in wide.columns]
    wide = wide.select(*KEYS, pl.col("n_seeds").cast(pl.Int64), *names)
    if predicted is not None and "expected_learnable_pct_posterior" in predicted.columns and "mixed_pct" in names:
        trained = wide.select("model", "task", "strategy").unique()
        at_zero = predicted.join(trained, on=["model", "task", "strategy"]).select(
            "model", "task", "strategy", pl.lit(0, dtype=pl.Int64).alias("step"),
            pl.col("expected_learnable_pct_posterior").alias("mixed_pct"))
        wide = pl.concat([wide, at_zero], how="diagonal_relaxed")
    return _in_strategy_order(wide, "step")


def _in_strategy_order(table: pl.DataFrame, *then: str) -> pl.DataFrame:
    """Rows by model, task, the strategies' order (strategy_sort_key), then `then`."""
    order = {s: i for i, s in enumerate(sorted(set(table["strategy"]), key=strategy_sort_key))}
    return (table.with_columns(pl.col("strategy").replace_strict(order).alias("_o"))
            .sort("model", "task", "_o", *then).drop("_o"))


def dynamics_note() -> str:
    """The training_dynamics table's note."""
    return ("Per model x task x strategy and training step, over the seeds that reached the step (n_seeds), the mean "
            "of: reward_mean, the step's mean reward; mixed_pct, the % of its GRPO groups whose rewards mixed (the "
            "only ones with a gradient); completion_length, mean new tokens; truncated_pct, the % of completions cut "
            "at grpo.max_completion_length (TRL's clipped ratio; absent for runs trained before it was recorded); "
            "kl, the KL to the reference where a run trained with beta > 0. Step 0 (no n_seeds): the % of mixed "
            "groups the probe predicted for the subset at the base model (subset_pass_rates' "
            "expected_learnable_pct_posterior); a run's first steps far from it met groups other than the probe "
            "saw. The training_dynamics figure draws the same numbers with the range over seeds.")
