"""The verdict tables in each metric of report.metrics (runs, Table 1 with its intervals and controls,
pairwise, headline, gain curve, power: `metric_verdicts`), stacked as one block per metric (`by_metric`),
and the findings that hold in one metric and not another (`metric_disagreements`).

Conventions: see `hardex.report`.
"""

from __future__ import annotations

from typing import Any, Sequence

import polars as pl

from hardex.report.beyond_controls import gain_beyond_controls
from hardex.report.gains import gain_curve, gain_table, with_seeds_and_questions_interval
from hardex.report.headline import DIFFERS, headline_table, interval_sign
from hardex.report.loading import METRICS, Results
from hardex.report.pairwise import pairwise_table
from hardex.report.power import power_table
from hardex.report.runs import run_summary


def metric_verdicts(res: Results, level: float, n_boot: int, seed: int, margin: float,
                    power: dict[str, Any]) -> dict[str, Any]:
    """The verdict tables in one metric (`res` already in it, `Results.in_metric`): runs (run_summary), gains
    (Table 1 with its intervals and controls), pairwise, headline (frame and note), the gain curve and power."""
    summary = run_summary(res)
    gains = gain_table(res, level, n_boot, seed, summary)
    gains = with_seeds_and_questions_interval(gains, res, summary, level, n_boot, seed)
    gains = gain_beyond_controls(gains, summary, res, level, n_boot, seed)
    pairwise = pairwise_table(res, summary, level, n_boot, seed, margin)  # the headline reads its verdicts
    return {"runs": summary, "gains": gains, "pairwise": pairwise, "headline": headline_table(gains, pairwise, level),
            "gain_curve": gain_curve(res, level),
            "power": power_table(summary, power["power"], power["alpha"], power["max_seeds"])}


def by_metric(verdicts: dict[str, dict[str, Any]], name: str) -> pl.DataFrame:
    """One verdict table over every metric: the blocks in report.metrics' order within each model x task,
    column `metric` after task (left out where only one metric is reported, as before metrics were named)."""
    frames = [(v[name][0] if isinstance(v[name], tuple) else v[name]) for v in verdicts.values()]
    if len(frames) == 1:
        return frames[0]
    blocks = []
    for rank, (metric, df) in enumerate(zip(verdicts, frames)):
        at = df.columns.index("task") + 1 if "task" in df.columns else 0
        blocks.append(df.with_columns(pl.lit(metric).alias("metric"), pl.lit(rank).alias("_metric"))
                      .select(*df.columns[:at], "metric", *df.columns[at:], "_metric"))
    both = pl.concat(blocks, how="diagonal_relaxed")
    keys = [k for k in ("model", "task") if k in both.columns]
    return both.with_row_index("_row").sort([*keys, "_metric", "_row"]).drop("_row", "_metric") if keys else \
        both.drop("_metric")


def metrics_note(metrics: Sequence[str]) -> str:
    """Which metric each verdict is in (report.metrics): the first decides, the others stand beside it."""
    first = f"Metric: {METRICS[metrics[0]]}"
    if len(metrics) == 1:
        return first + "."
    rest = "; ".join(METRICS[m] for m in metrics[1:])
    return (f"Metrics (column metric, report.metrics): {METRICS[metrics[0]]}, the first, decides (the sequential "
            f"design's looks and the sentences above); beside it {rest}. The same checkpoints in each: a verdict "
            f"that holds in one metric and not in another is said so.")


def metric_disagreements(verdicts: dict[str, dict[str, Any]]) -> list[str]:
    """Per model x task, the findings that hold in one metric and not another, in words: a gain shown above or
    below zero (its interval over seeds), a pair that differs after Holm's correction and which run leads."""
    if len(verdicts) < 2:
        return []
    found: dict[tuple, dict[str, tuple[str, float]]] = {}
    for metric, v in verdicts.items():
        for r in v["headline"][0].iter_rows(named=True):
            sign = interval_sign(r["gain_ci_low"], r["gain_ci_high"]) if r["n_seeds"] > 1 else 0
            state = {1: "shown", -1: "a loss shown", 0: "not shown"}[sign]
            found.setdefault((r["model"], r["task"], f"{r['strategy']}'s gain"), {})[metric] = (state, r["gain"])
        for r in v["pairwise"].iter_rows(named=True):
            if r["difference"] is None:
                continue
            lead = r["strategy"] if r["difference"] > 0 else r["versus"]
            state = f"differs, {lead} ahead" if (r["verdict"] or "").startswith(DIFFERS) else "not shown"
            found.setdefault((r["model"], r["task"], f"{r['strategy']} - {r['versus']}"), {})[metric] = (
                state, r["difference"])
    out = []
    for (model, task, what), by in found.items():
        if len({state for state, _ in by.values()}) > 1:
            words = [f"{state} in {metric} ({value:+.1f})" for metric, (state, value) in by.items()]
            out.append(f"{model} on {task}: {what} {' but '.join(words)}.")
    return out
