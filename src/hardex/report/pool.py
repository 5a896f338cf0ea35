"""The training pool and the subsets drawn from it: the pool's pass-rate distribution, each subset's size and
pass rates, the learnable % expected from the probe before any training (`with_expected_mixed`: from each
example's raw count and from its Beta posterior), and the subsets that collapsed into one tie of pass rates.

Conventions: see `hardex.report`.
"""

from __future__ import annotations

import polars as pl

from hardex.learnability import tie
from hardex.metrics import expected_mixed
from hardex.posterior import expected_mixed_posterior, with_posterior
from hardex.report.runs import CELL_KEYS, in_paper_order


def pool_distribution(probes: pl.DataFrame) -> pl.DataFrame:
    """The pool's pass-rate distribution: examples per pass-rate value (j / K) per model x task."""
    return (probes.group_by(["model", "task", "pass_rate"]).agg(pl.len().cast(pl.Int64).alias("n_examples"))
            .with_columns((100 * pl.col("n_examples") / pl.col("n_examples").sum().over(["model", "task"]))
                          .alias("share_pct"))
            .sort(["model", "task", "pass_rate"]))


def with_expected_mixed(probes: pl.DataFrame, subsets: pl.DataFrame, group_sizes: dict[str, int]
                        ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Probe and subset rows with `expected_mixed` for each example, for the group size G of its
    model's GRPO runs (`group_sizes`: model -> G): from the raw count (`metrics.expected_mixed`), and as
    `expected_mixed_posterior` from the example's Beta posterior under a prior fitted to its pool
    (`posterior.expected_mixed_posterior`; each model x task's probe is one pool)."""
    def add(df: pl.DataFrame) -> pl.DataFrame:
        rows = zip(df["model"], df["pass_rate"], df["k"])
        values = [expected_mixed(round(rate * k), k, group_sizes[m]) for m, rate, k in rows]
        return df.with_columns(pl.Series("expected_mixed", values, dtype=pl.Float64))

    def add_posterior(pool: pl.DataFrame) -> pl.DataFrame:
        pool = with_posterior(pool.with_columns(n_correct=(pl.col("pass_rate") * pl.col("k")).round().cast(pl.Int64))
                              )[0]
        group_size = group_sizes[pool["model"][0]]
        values = [expected_mixed_posterior(a, b, group_size) for a, b in zip(pool["posterior_a"], pool["posterior_b"])]
        return pool.select(*keep, pl.Series("expected_mixed_posterior", values, dtype=pl.Float64))

    probes = add(probes)
    keep = probes.columns
    if probes.height:
        probes = pl.concat([add_posterior(pool) for _, pool in probes.group_by(["model", "task"], maintain_order=True)])
    else:
        probes = probes.with_columns(pl.lit(None, dtype=pl.Float64).alias("expected_mixed_posterior"))
    subsets = subsets.join(probes.select("model", "task", "id", "k", "expected_mixed", "expected_mixed_posterior"),
                           on=["model", "task", "id"], how="left")
    return probes, subsets


def subset_pass_rates(probes: pl.DataFrame, subsets: pl.DataFrame,
                      group_sizes: dict[str, int] | None = None) -> pl.DataFrame:
    """Size and pass-rate summary of the pool ("pool" rows) and of each selected subset; with
    `group_sizes`, also the learnable % expected before any training (mean of `expected_mixed`)."""
    cols = ["model", "task", "strategy", "seed", "pass_rate"]
    if group_sizes is not None:
        probes, subsets = with_expected_mixed(probes, subsets, group_sizes)
        cols += ["expected_mixed", "expected_mixed_posterior"]
    pool = probes.with_columns(pl.lit("pool").alias("strategy"), pl.lit(0, dtype=pl.Int64).alias("seed"))
    both = pl.concat([pool.select(cols), subsets.select(cols)], how="vertical_relaxed")
    # one subset per run seed: sizes per seed, pass rates over every seed's draw
    aggs = [(pl.len() / pl.col("seed").n_unique()).round().cast(pl.Int64).alias("n_examples"),
            pl.col("pass_rate").mean().alias("mean_pass_rate"),
            pl.col("pass_rate").median().alias("median_pass_rate"), pl.col("pass_rate").min().alias("min_pass_rate"),
            pl.col("pass_rate").max().alias("max_pass_rate")]
    if group_sizes is not None:
        aggs += [(100 * pl.col("expected_mixed").mean()).alias("expected_learnable_pct"),
                 (100 * pl.col("expected_mixed_posterior").mean()).alias("expected_learnable_pct_posterior")]
    aggs.append((pl.col("pass_rate").is_between(0, 1, closed="none").sum() / pl.col("seed").n_unique())
                .alias("learnable_examples"))
    table = both.group_by(CELL_KEYS).agg(aggs).join(subset_ties(probes, subsets), on=CELL_KEYS, how="left")
    return in_paper_order(table, CELL_KEYS)


def subset_ties(probes: pl.DataFrame, subsets: pl.DataFrame) -> pl.DataFrame:
    """Per model x task x strategy, `tied_at`: the pass rate every seed's subset was drawn from when each
    is a random draw inside one tie of pass rates larger than itself (`learnability.tie`), else null.
    Two strategies tied at the same rate trained on the same kind of examples."""
    rows = []
    for (model, task, strategy), grp in subsets.group_by(CELL_KEYS):
        probe = probes.filter((pl.col("model") == model) & (pl.col("task") == task))
        found = {tie(seed_rows, probe) for _, seed_rows in grp.group_by("seed")}
        rate = next(iter(found))[0] if len(found) == 1 and None not in found else None
        rows.append({"model": model, "task": task, "strategy": strategy, "tied_at": rate})
    return pl.DataFrame(rows, schema={"model": pl.Utf8, "task": pl.Utf8, "strategy": pl.Utf8, "tied_at": pl.Float64})


def ties_note(subsets_table: pl.DataFrame) -> str:
    """The table note's sentence naming strategies whose subsets collapsed into one tie, or ''."""
    tied = subsets_table.filter(pl.col("tied_at").is_not_null())
    if tied.height == 0:
        return ""
    parts = [f"{r['model']}/{r['task']} {r['strategy']} at {r['tied_at']:g}" for r in tied.iter_rows(named=True)]
    return (" tied_at: the subset is a seeded random draw among pool examples that all share this pass rate, "
            "so the ranking chose nothing and strategies tied at the same rate train on the same kind of "
            "examples: " + "; ".join(parts) + ".")


#: the pool_pass_rates table's note
POOL_NOTE = "Pool examples per probe pass rate (correct samples / K)."

#: what the expected_learnable_pct columns mean (the learnable and subset_pass_rates tables carry them)
EXPECTED_LEARNABLE_NOTE = (
    " expected_learnable_pct: predicted before training from the probe, the mean chance "
    "that a group of G samples of the base model mixes right and wrong answers, from each "
    "example's raw k of K; the subsets were chosen on those same samples, so it reads low "
    "for the hardest and high for the easiest (0 for examples never solved). "
    "expected_learnable_pct_posterior: the same from each example's Beta posterior given "
    "its k of K under a prior fitted to the pool's counts (hardex.posterior), which corrects "
    "part of that selection bias, not all of it (on a pool the model sometimes solves, 0 "
    "of K is not never): compare both with learnable_pct. Both predict the base model's groups; "
    "training moves the policy away from it, so the measured learnable % drifts from them as it learns.")


def subsets_note(subsets_table: pl.DataFrame, expected: bool) -> str:
    """The subset_pass_rates table's note; `expected`: whether it carries the expected learnable % columns."""
    return ("Size and pass rates of the pool and of each selected subset; learnable_examples: "
            "those with 0 < pass rate < 1 (mean over seeds), the only ones whose GRPO groups "
            "can mix rewards." + (EXPECTED_LEARNABLE_NOTE if expected else "") + ties_note(subsets_table))
