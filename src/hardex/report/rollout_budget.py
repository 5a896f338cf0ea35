"""The rollout budget: what each strategy cost in generated completions and tokens, probing included, beside
its gain, so that offline selection and online filtering compare at equal compute.

Conventions: see `hardex.report`.
"""

from __future__ import annotations

import polars as pl

from hardex.report.runs import CELL_KEYS, RUN_KEYS, in_paper_order
from hardex.selection import BOUNDARY_STRATEGIES, FILTER_STRATEGIES, RunName


def rollout_budget(gains: pl.DataFrame, steps: pl.DataFrame, probes: pl.DataFrame) -> pl.DataFrame:
    """What each model x task x strategy cost in generated completions (rollouts) and tokens, beside its
    gain, so that offline selection and online filtering compare at equal compute.

    probe: the probe samples that chose the subset, charged in full to every strategy that reads pass
    rates (their subsets all come from one probe of the whole pool); none for random, full, the tier
    strategies and the base-model splits (those read one greedy answer per example, not counted).
    train: completions trained on; discarded: completions of groups online filtering dropped. Means
    over seeds. Tokens where a step did not record them (TRL's own generate) are its mean completion
    length times its rollouts.
    """
    if steps.height == 0 or "rollouts_generated" not in steps.columns:
        return pl.DataFrame()
    steps = steps.with_columns(
        pl.col("rollouts_discarded").fill_null(0),
        pl.col("tokens_generated").fill_null((pl.col("completion_length") * pl.col("rollouts_generated")).round()),
        pl.col("filter_capped").fill_null(False),  # recorded with the rollout counts (STEP_COLUMNS)
    )
    runs = steps.group_by(RUN_KEYS).agg(
        (pl.col("rollouts_generated") - pl.col("rollouts_discarded")).sum().alias("train_rollouts"),
        pl.col("rollouts_discarded").sum().alias("discarded_rollouts"),
        pl.col("tokens_generated").sum().alias("generated_tokens"),
        pl.col("filter_capped").sum().alias("capped_steps"),
    )
    if "tokens" not in probes.columns:
        probes = probes.with_columns(pl.lit(None, dtype=pl.Int64).alias("tokens"))
    probe_cost = probes.group_by("model", "task").agg(pl.col("k").sum().alias("pool_probe_rollouts"),
                                                      pl.col("tokens").sum().alias("pool_probe_tokens"))
    reads_probe = [s for s in runs["strategy"].unique()
                   if RunName.parse(s).strategy in BOUNDARY_STRATEGIES + FILTER_STRATEGIES]
    cells = runs.group_by(CELL_KEYS).agg(pl.col("train_rollouts", "discarded_rollouts", "generated_tokens",
                                                "capped_steps").mean())
    cells = cells.join(probe_cost, on=["model", "task"], how="left").with_columns(
        pl.when(pl.col("strategy").is_in(reads_probe)).then(pl.col("pool_probe_rollouts")).otherwise(0)
        .alias("probe_rollouts"),
        pl.when(pl.col("strategy").is_in(reads_probe)).then(pl.col("pool_probe_tokens")).otherwise(0)
        .alias("probe_tokens"),
    ).with_columns(
        (pl.col("probe_rollouts") + pl.col("train_rollouts") + pl.col("discarded_rollouts")).alias("total_rollouts"),
        (pl.col("probe_tokens") + pl.col("generated_tokens")).alias("total_tokens"),
    ).with_columns((100 * pl.col("probe_rollouts") / pl.col("total_rollouts")).alias("probe_share_pct"))
    out = cells.join(gains.select(*CELL_KEYS, "n_seeds", "gain", "gain_ci_low", "gain_ci_high"), on=CELL_KEYS,
                     how="left")
    return in_paper_order(out.select(*CELL_KEYS, "n_seeds", "probe_rollouts", "train_rollouts", "discarded_rollouts",
                             "total_rollouts", "probe_share_pct", "probe_tokens", "generated_tokens", "total_tokens",
                             "capped_steps", "gain", "gain_ci_low", "gain_ci_high"), CELL_KEYS)


def rollout_budget_note(budget: pl.DataFrame, level: float) -> str:
    """The rollout_budget table's note, or why it is empty."""
    return ("Completions (rollouts) and tokens each strategy generated, mean over seeds. "
            "probe: the probe samples of the whole pool, charged to every strategy that "
            "selects by pass rate (hard, medium, easy, band, learnable and their _online "
            "runs), none to the others; train: completions trained on; discarded: those of "
            "groups online filtering dropped for agreeing rewards; capped_steps: steps where "
            "it reached grpo.online_max_rounds. Tokens: new tokens, EOS included (TRL's own "
            "generate records none: its mean completion length times its rollouts). Gain as "
            f"in accuracy_gain, with its {round(100 * level)} % interval." if budget.height else
            "No run recorded its rollouts (results from before the count was kept).")
