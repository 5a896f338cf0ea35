"""A survey of tasks by probing alone: which pools sit in the band where GRPO can learn (rule `survey`).

Per model x task x tier (and per task over all its tiers: tier "all"), from the probe tables: how many
examples, the mean pass rate, the shares the model never solved in its K samples, always solved, and solved
sometimes, the greedy answer's accuracy, and the pool's expected share of mixed groups of G (the learnable %
GRPO would see training on the whole pool, `metrics.expected_mixed`, each example's own estimate averaged).
A group whose rewards agree carries no gradient, so a pool never or always solved teaches nothing; a pool
with a large expected mixed share is where the choice of subset can matter.
"""

from __future__ import annotations

import polars as pl

from hardex.metrics import expected_mixed, sort_tiers

COLUMNS = ("model", "task", "tier", "n", "pass_rate", "never", "always", "between", "expected_mixed", "greedy")


def _row(model: str, task: str, tier: str, probe: pl.DataFrame, g: int) -> dict:
    k, c = probe["k"].to_list(), probe["n_correct"].to_list()
    greedy = probe["greedy_correct"].drop_nulls() if "greedy_correct" in probe.columns else pl.Series([])
    n = probe.height
    return {
        "model": model, "task": task, "tier": tier, "n": n,
        "pass_rate": 100 * float(probe["pass_rate"].mean()),
        "never": 100 * sum(x == 0 for x in c) / n,
        "always": 100 * sum(x == kk for x, kk in zip(c, k)) / n,
        "between": 100 * sum(0 < x < kk for x, kk in zip(c, k)) / n,
        "expected_mixed": 100 * sum(expected_mixed(x, kk, g) for x, kk in zip(c, k)) / n,
        "greedy": 100 * float(greedy.cast(pl.Float64).mean()) if greedy.len() else None,
    }


def survey_table(probes: dict[tuple[str, str], pl.DataFrame], group_sizes: dict[str, int]) -> pl.DataFrame:
    """The survey (module docstring) of {(model, task): its probe table}, in % (n: examples). Tasks are ordered by
    their pool's expected mixed share, largest first; a task's tiers follow its "all" row."""
    rows = []
    for (model, task), probe in probes.items():
        g = group_sizes[model]
        rows.append(_row(model, task, "all", probe, g))
        if "tier" in probe.columns and probe["tier"].drop_nulls().len():
            for (tier,), part in probe.group_by(["tier"], maintain_order=True):
                rows.append(_row(model, task, str(tier), part, g))
    if not rows:
        return pl.DataFrame(schema={c: pl.Utf8 for c in COLUMNS})
    table = pl.DataFrame(rows)
    order = (table.filter(pl.col("tier") == "all").sort(["model", "expected_mixed"], descending=[False, True])
             .with_row_index("_order").select("model", "task", "_order"))
    table = table.join(order, on=["model", "task"]).with_columns((pl.col("tier") != "all").alias("_tiered"))
    table = sort_tiers(table, before=["_order", "_tiered"]).drop("_order", "_tiered")
    return table.select(COLUMNS)


NOTE = ("Per task and difficulty tier: n examples probed K times; pass_rate, the mean share of right samples; never, "
        "always and between, the shares of examples solved in none, all and some of their K samples; "
        "expected_mixed, the expected share of GRPO groups of G whose rewards mix (their only source of gradient), "
        "training on that pool; greedy, the greedy answer's accuracy. All in %. Tasks by expected_mixed, largest "
        "first; 'all' is the task's whole pool.")
